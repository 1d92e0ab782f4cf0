package main

import (
	"io"
	"net/url"
	"strconv"
	"strings"
)

// Redis URLs carry the password (redis://user:PASSWORD@host:6379): wfc
// never prints one. The help shows $WFC_REDIS redacted, and the runtime
// commands write their standard error through a redactor, so an error
// that echoes the URL (a malformed one, as the URL parser and the
// runtime quote it) shows it redacted too.

// redacted replaces a password.
const redacted = "xxxxx"

// redactURL returns raw with the password of its userinfo replaced by
// xxxxx, as url.URL.Redacted does; unlike it, it also handles what
// url.Parse refuses: redis+cluster://user:pw@h1:p1,h2:p2 and malformed
// URLs.
func redactURL(raw string) string {
	if !strings.Contains(raw, "@") {
		return raw
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	user, _, hasPw := userinfo(raw)
	if !hasPw {
		return raw
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	return scheme + "://" + user + ":" + redacted + rest[strings.LastIndex(rest, "@"):]
}

// userinfo splits the userinfo of a URL written scheme://user:pw@hosts...
// It is generous on purpose: everything before the last '@' is userinfo,
// so that a password holding '/', '?', '#' or '@' is still found in a URL
// url.Parse refuses. A userinfo without ':' is a user name (go-redis reads
// it so), not a password.
func userinfo(raw string) (user, pw string, hasPw bool) {
	_, rest, found := strings.Cut(raw, "://")
	if !found {
		return "", "", false
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return "", "", false
	}
	return strings.Cut(rest[:at], ":")
}

// redactor returns a function that removes the password of the Redis URL
// raw from a text: the URL as written, quoted (url.Parse's errors quote
// it), and the password itself, as written and unescaped, wherever it
// appears. For a URL without a password it returns nil.
func redactor(raw string) func(string) string {
	var secrets []string
	if _, pw, ok := userinfo(raw); ok && pw != "" {
		secrets = append(secrets, pw)
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			secrets = append(secrets, pw)
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	red := redactURL(raw)
	pairs := []string{raw, red}
	if q, rq := strconv.Quote(raw), strconv.Quote(red); q != `"`+raw+`"` {
		pairs = append(pairs, q[1:len(q)-1], rq[1:len(rq)-1])
	}
	for _, s := range secrets {
		if dec, err := url.PathUnescape(s); err == nil && dec != s {
			secrets = append(secrets, dec)
		}
	}
	for _, s := range secrets {
		// A short password could also be a word of a message: alone it
		// is replaced only when long enough, else as the userinfo's.
		pairs = append(pairs, ":"+s+"@", ":"+redacted+"@")
		if len(s) >= 4 {
			pairs = append(pairs, s, redacted)
		}
	}
	return strings.NewReplacer(pairs...).Replace
}

// redactWriter writes through w with the password of a Redis URL removed
// from each write (wfc writes each message and log line with one call).
type redactWriter struct {
	w      io.Writer
	redact func(string) string
}

func (r *redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, r.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// withRedactedStderr returns env with its standard error redacting the
// password of redisURL; env itself when the URL has none.
func withRedactedStderr(env *Env, redisURL string) *Env {
	red := redactor(redisURL)
	if red == nil {
		return env
	}
	e := *env
	e.Stderr = &redactWriter{w: env.Stderr, redact: red}
	return &e
}
