package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The handlers that call HTTP (http, and the services of wfc worker
// --handler NAME=URL) share what is below: one request sent with its
// bounded response read (outbound.send), its failure statuses
// (statusError), and the loop that sends it again (retrySend).

// maxBody bounds the response body the http and service handlers read.
const maxBody = 10 << 20

// retrySend calls send until it succeeds, up to tries times, while it
// fails with a retryable error: waiting as the server asked (the wait
// send returns, from Retry-After), else 0.2 s, 0.4 s, 0.8 s ..., never
// more than maxWait. A permanent error, or ctx's end, stops it at once;
// after the last try the last error is returned, for the node's retry
// policy.
func retrySend(ctx context.Context, tries int, maxWait time.Duration, send func() (json.RawMessage, time.Duration, error)) (json.RawMessage, error) {
	var lastErr error
	for try := 1; try <= tries; try++ {
		out, wait, err := send()
		if err == nil {
			return out, nil
		}
		if IsPermanent(err) || ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
		if try == tries {
			break
		}
		if wait <= 0 {
			wait = time.Duration(200<<(try-1)) * time.Millisecond
		}
		t := time.NewTimer(min(wait, maxWait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	return nil, lastErr
}

// An outbound request is one JSON request a handler sends, the same on
// every try.
type outbound struct {
	client *http.Client
	// what starts the error messages: "http", a service's name.
	what   string
	method string
	url    string
	shown  string // url without its password, for messages
	// body is sent as application/json; nil sends none.
	body           []byte
	idempotencyKey string // sent as Idempotency-Key, when not ""
	// headers are set last, over the defaults.
	headers map[string]string
}

// send sends the request once and reads the response's body, at most
// maxBody bytes. Errors: a request that cannot be made, and a body over
// maxBody, are permanent; one the network policy refused is
// CodeHTTPDenied (permanent); one that got no response, or whose body
// could not be read, is retryable with code http.network (timeout when a
// deadline passed). A response of any status is returned with its body
// read (and closed).
func (o *outbound) send(ctx context.Context) (*http.Response, []byte, error) {
	var body io.Reader
	if o.body != nil {
		body = bytes.NewReader(o.body)
	}
	hr, err := http.NewRequestWithContext(ctx, o.method, o.url, body)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, Permanentf("%s: bad request for %s: %v", o.what, o.shown, err)
	}
	if o.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	if o.idempotencyKey != "" {
		hr.Header.Set("Idempotency-Key", o.idempotencyKey)
	}
	for k, v := range o.headers {
		hr.Header.Set(k, v)
	}
	resp, err := o.client.Do(hr)
	if err != nil {
		var de *deniedError
		if errors.As(err, &de) {
			return nil, nil, &Error{Code: CodeHTTPDenied, Message: fmt.Sprintf("%s: %s %s: %v", o.what, hr.Method, o.shown, de), Err: de}
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // (it repeats the method and URL)
		}
		return nil, nil, Errorf(networkCode(err), true, "%s: %s %s: %w", o.what, hr.Method, o.shown, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, nil, Errorf(networkCode(err), true, "%s: reading the response: %w", o.what, err)
	}
	if len(data) > maxBody {
		return nil, nil, Permanentf("%s: response body over %d bytes", o.what, maxBody)
	}
	return resp, data, nil
}

// networkCode is the code of a request that failed on the way: timeout
// when a deadline passed, else http.network.
func networkCode(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return CodeTimeout
	}
	return "http.network"
}

// statusError is the failure of a response whose status fails the
// attempt: code http.<status>, retryable for 408, 425, 429 and 5xx, the
// message naming the request and the status and, for a 4xx, the start
// of data, the body (a 5xx's is often a proxy's HTML page).
func (o *outbound) statusError(resp *http.Response, data []byte) *Error {
	st := resp.StatusCode
	retry := st >= 500 || st == http.StatusRequestTimeout || st == http.StatusTooEarly || st == http.StatusTooManyRequests
	e := &Error{Code: fmt.Sprintf("http.%d", st), Retryable: retry, Message: fmt.Sprintf("%s: %s %s: %s", o.what, o.method, o.shown, resp.Status)}
	if b := strings.TrimSpace(string(data)); b != "" && st < 500 {
		e.Message += ": " + clipText(b, 300)
	}
	return e
}

// retryWait is how long a response asks to wait before the next try of a
// retryable failure (Retry-After); 0 for none, or when err is not
// retryable.
func retryWait(resp *http.Response, err *Error) time.Duration {
	if !err.Retryable {
		return 0
	}
	return retryAfter(resp.Header.Get("Retry-After"))
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}
