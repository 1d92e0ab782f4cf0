package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scopes a token may hold (docs/api.md, "Security model").
const (
	ScopeRead   = "read"   // list and get workflows, runs, events, approvals
	ScopeSubmit = "submit" // deploy workflows, submit, cancel and retry runs
	ScopeDecide = "decide" // decide approvals, send signals, issue completion tokens
	ScopeAdmin  = "admin"  // every scope
	ScopeWork   = "work"   // the remote task queue (/v1/tasks/), for external workers
)

var knownScopes = []string{ScopeRead, ScopeSubmit, ScopeDecide, ScopeAdmin, ScopeWork}

// A Principal is who a request's token says it comes from.
type Principal struct {
	Subject string
	Scopes  []string
}

// Allows reports whether p holds scope (admin holds all).
func (p *Principal) Allows(scope string) bool {
	return slices.Contains(p.Scopes, scope) || slices.Contains(p.Scopes, ScopeAdmin)
}

// A token is one entry of the token table: the SHA-256 of the secret (the
// secret itself is not kept, so a heap dump or a log of the table shows no
// token), its subject, scopes and optional expiry.
type token struct {
	sum     [32]byte
	subject string
	scopes  []string
	expires time.Time
}

// Tokens is the table of bearer tokens: from a file (reloaded when it
// changes) and from the environment. The zero value accepts nothing.
type Tokens struct {
	path   string
	envTxt string
	log    *slog.Logger

	mu      sync.RWMutex
	list    []token
	modTime time.Time
	size    int64
	checked time.Time
	now     func() time.Time
}

// maxTokenFile bounds the token file.
const maxTokenFile = 1 << 20

// LoadTokens reads the token table from path (may be "") and env (the
// value of WFC_SERVE_TOKENS; may be ""). Each line of either is
//
//	TOKEN SUBJECT SCOPE[,SCOPE...] [expires=RFC3339]
//
// with # comments and blank lines ignored (in env, ";" separates lines
// too). A token is at least 16 bytes. The file is read again when its
// modification time or size changes, at most once a second; a file that
// fails to parse on reload keeps the previous table and logs why.
func LoadTokens(path, env string, log *slog.Logger) (*Tokens, error) {
	if log == nil {
		log = slog.Default()
	}
	t := &Tokens{path: path, envTxt: env, log: log, now: time.Now}
	if err := t.reload(true); err != nil {
		return nil, err
	}
	return t, nil
}

// Empty reports whether no token is configured.
func (t *Tokens) Empty() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.list) == 0
}

func (t *Tokens) reload(force bool) error {
	var list []token
	if t.envTxt != "" {
		l, err := parseTokens(strings.ReplaceAll(t.envTxt, ";", "\n"), "WFC_SERVE_TOKENS")
		if err != nil {
			return err
		}
		list = append(list, l...)
	}
	var mod time.Time
	var size int64
	if t.path != "" {
		fi, err := os.Stat(t.path)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		mod, size = fi.ModTime(), fi.Size()
		if !force {
			t.mu.RLock()
			same := mod.Equal(t.modTime) && size == t.size
			t.mu.RUnlock()
			if same {
				return nil
			}
		}
		if size > maxTokenFile {
			return fmt.Errorf("token file %s: %d bytes, over the limit of %d", t.path, size, maxTokenFile)
		}
		data, err := os.ReadFile(t.path)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		l, err := parseTokens(string(data), t.path)
		if err != nil {
			return err
		}
		list = append(list, l...)
	}
	t.mu.Lock()
	t.list, t.modTime, t.size = list, mod, size
	t.mu.Unlock()
	return nil
}

func parseTokens(text, where string) ([]token, error) {
	var out []token
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, maxTokenFile)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		// Errors name the line, never its text: it holds a secret.
		if len(f) < 3 || len(f) > 4 {
			return nil, fmt.Errorf("%s:%d: want TOKEN SUBJECT SCOPES [expires=TIME]", where, line)
		}
		if len(f[0]) < 16 {
			return nil, fmt.Errorf("%s:%d: a token is at least 16 bytes", where, line)
		}
		tk := token{sum: sha256.Sum256([]byte(f[0])), subject: f[1]}
		for _, sc := range strings.Split(f[2], ",") {
			if !slices.Contains(knownScopes, sc) {
				return nil, fmt.Errorf("%s:%d: unknown scope %q (scopes: %s)", where, line, sc, strings.Join(knownScopes, ", "))
			}
			tk.scopes = append(tk.scopes, sc)
		}
		if len(f) == 4 {
			v, ok := strings.CutPrefix(f[3], "expires=")
			exp, err := time.Parse(time.RFC3339, v)
			if !ok || err != nil {
				return nil, fmt.Errorf("%s:%d: want expires=RFC3339 time as the fourth field", where, line)
			}
			tk.expires = exp
		}
		out = append(out, tk)
	}
	return out, sc.Err()
}

// maybeReload re-reads the file when a second passed since the last check.
func (t *Tokens) maybeReload() {
	if t.path == "" {
		return
	}
	t.mu.RLock()
	due := t.now().Sub(t.checked) >= time.Second
	t.mu.RUnlock()
	if !due {
		return
	}
	t.mu.Lock()
	t.checked = t.now()
	t.mu.Unlock()
	if err := t.reload(false); err != nil {
		t.log.Error("wfc serve: reloading the token file; keeping the previous tokens", "err", err)
	}
}

var errNoToken = errors.New("no bearer token")

// authenticate returns the principal of a bearer token. Every entry is
// compared, in constant time, whatever matches: the time taken tells
// nothing about which token or how much of it matched.
func (t *Tokens) authenticate(secret string) (*Principal, error) {
	if secret == "" {
		return nil, errNoToken
	}
	t.maybeReload()
	sum := sha256.Sum256([]byte(secret))
	t.mu.RLock()
	defer t.mu.RUnlock()
	var found *token
	for i := range t.list {
		if subtle.ConstantTimeCompare(sum[:], t.list[i].sum[:]) == 1 && found == nil {
			found = &t.list[i]
		}
	}
	if found == nil {
		return nil, errors.New("unknown token")
	}
	if !found.expires.IsZero() && !t.now().Before(found.expires) {
		return nil, errors.New("expired token")
	}
	return &Principal{Subject: found.subject, Scopes: slices.Clone(found.scopes)}, nil
}

func bearer(h string) string {
	const p = "bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		return strings.TrimSpace(h[len(p):])
	}
	return ""
}

type principalKey struct{}

func principalOf(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// anonymous is the principal of a server without tokens (loopback only):
// it may do everything, as `wfc` against the same Redis could.
var anonymous = &Principal{Subject: "local", Scopes: []string{ScopeAdmin}}

// Authorized is tasksapi.Config.Authorize for the handler mounted as
// Config.TasksHandler: the server has already checked the bearer token
// and scope "work" (the handler runs behind authorize), so it returns the
// token's subject; a request that did not come through the server (the
// handler served on its own) is refused.
func Authorized(r *http.Request) (string, error) {
	p := principalOf(r.Context())
	if p == nil {
		return "", errors.New("the request did not pass the server's authentication")
	}
	return p.Subject, nil
}
