package lsp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// The transport: JSON-RPC 2.0 messages framed by "Content-Length" headers,
// as the base protocol of LSP defines them. It is wfc's own (about a hundred
// lines) rather than glsp's server so that one place can recover handler
// panics, send notifications from other goroutines, and run over any pipe
// in tests; glsp still provides the protocol types and the dispatch.

// maxMessage bounds one message. A .wf file is at most 4 MiB; JSON escaping
// can double it, and full-text changes carry the whole file.
const maxMessage = 64 << 20

// JSON-RPC and LSP error codes.
const (
	codeParseError           = -32700
	codeInvalidRequest       = -32600
	codeMethodNotFound       = -32601
	codeInvalidParams        = -32602
	codeInternalError        = -32603
	codeServerNotInitialized = -32002
	codeRequestFailed        = -32803
)

// An rpcError is the error object of a response.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// A message is any JSON-RPC message: a request (ID and Method), a
// notification (Method only) or a response (ID, and Result or Error).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func (m *message) isRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

// responses are written with these types so that a successful response
// always has a "result" member (null included) and a failed one none.
type resultResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result"`
}

type errorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *rpcError       `json:"error"`
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// errBadFrame reports a header the reader cannot make sense of; the stream
// cannot be resynchronised after it.
var errBadFrame = errors.New("malformed message header")

// A stream reads and writes framed messages. Reads happen on one goroutine;
// writes may come from any goroutine.
type stream struct {
	r  *bufio.Reader
	mu sync.Mutex // serialises writes
	w  io.Writer
}

func newStream(r io.Reader, w io.Writer) *stream {
	return &stream{r: bufio.NewReaderSize(r, 64<<10), w: w}
}

// read returns the body of the next message. io.EOF means the peer closed
// the stream between messages.
func (s *stream) read() ([]byte, error) {
	length := -1
	for first := true; ; first = false {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && first && line == "" {
				return nil, io.EOF
			}
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if first {
				continue // tolerate a stray blank line between messages
			}
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%w: %q", errBadFrame, line)
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			n, err := strconv.Atoi(strings.TrimSpace(value))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: bad Content-Length %q", errBadFrame, value)
			}
			length = n
		}
	}
	if length < 0 {
		return nil, fmt.Errorf("%w: no Content-Length", errBadFrame)
	}
	if length > maxMessage {
		return nil, fmt.Errorf("%w: message of %d bytes exceeds the limit of %d", errBadFrame, length, maxMessage)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(s.r, body); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return body, nil
}

// write sends one message.
func (s *stream) write(v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Grow(len(body) + 32)
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.w.Write(b.Bytes())
	return err
}

func (s *stream) reply(id json.RawMessage, result any) error {
	return s.write(resultResponse{JSONRPC: "2.0", ID: id, Result: result})
}

func (s *stream) replyError(id json.RawMessage, e *rpcError) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return s.write(errorResponse{JSONRPC: "2.0", ID: id, Error: e})
}

func (s *stream) notify(method string, params any) error {
	return s.write(notification{JSONRPC: "2.0", Method: method, Params: params})
}
