package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/common/types"

	"github.com/wfc-lang/wfc/ir"
	"github.com/wfc-lang/wfc/runtime/handlers"
)

// CodeSecret is the error code of a node that reads a secret input whose
// secret the worker does not have.
const CodeSecret = "secret"

// Secret files and values (docs/runtime.md §10).
const (
	// SecretEnvPrefix prefixes the environment variables LoadSecrets reads:
	// WFC_SECRET_<name>.
	SecretEnvPrefix = "WFC_SECRET_"
	// MinSecretBytes is the shortest secret value: masking a shorter one
	// would blank out ordinary text, and with it masking never makes a
	// value longer (*** is 3 bytes).
	MinSecretBytes = 4
	// MaxSecretsFileBytes bounds a secrets file.
	MaxSecretsFileBytes = 1 << 20
	// secretMask replaces a secret value in everything a worker writes.
	secretMask = "***"
)

// Secrets are the secret values a worker resolves secret inputs to, by
// name, and masks in everything it writes. Build them with NewSecrets or
// LoadSecrets; the zero value and nil have none.
type Secrets struct {
	vals map[string]string
	mask *strings.Replacer // every value and its JSON-escaped forms -> ***
	// names lists the names, sorted (for messages and Names).
	names []string
}

// NewSecrets checks and holds secret values by name. A name must be a
// secret name (ir.ValidSecretName); a value at least MinSecretBytes long.
// Errors name the secret, never its value.
func NewSecrets(vals map[string]string) (*Secrets, error) {
	s := &Secrets{vals: map[string]string{}}
	var forms []string
	seen := map[string]bool{}
	for name, v := range vals {
		if !ir.ValidSecretName(name) {
			return nil, fmt.Errorf("secret %q: a secret name is [A-Za-z_][A-Za-z0-9_]* (at most 128 bytes)", name)
		}
		if len(v) < MinSecretBytes {
			return nil, fmt.Errorf("secret %s: the value is shorter than %d bytes, too short to be masked", name, MinSecretBytes)
		}
		s.vals[name] = v
		s.names = append(s.names, name)
		for _, f := range secretForms(v) {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, f)
			}
		}
	}
	sort.Strings(s.names)
	// Longest first: a value that contains another is masked whole.
	sort.Slice(forms, func(i, k int) bool {
		if len(forms[i]) != len(forms[k]) {
			return len(forms[i]) > len(forms[k])
		}
		return forms[i] < forms[k]
	})
	if len(forms) > 0 {
		pairs := make([]string, 0, 2*len(forms))
		for _, f := range forms {
			pairs = append(pairs, f, secretMask)
		}
		s.mask = strings.NewReplacer(pairs...)
	}
	return s, nil
}

// secretForms are the spellings of a secret value masked in text: the value
// itself, its JSON-escaped forms (with and without Go's HTML escaping), and
// those escaped once more (a JSON document held in a JSON string).
func secretForms(v string) []string {
	esc := func(s string, html bool) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		_ = enc.Encode(s)
		out := strings.TrimSuffix(b.String(), "\n")
		return out[1 : len(out)-1]
	}
	forms := []string{v}
	for _, html := range []bool{false, true} {
		e := esc(v, html)
		forms = append(forms, e, esc(e, html))
	}
	return forms
}

// LoadSecrets reads the secrets of a worker: every environment variable
// WFC_SECRET_<name> of environ (os.Environ() form), then the JSON object
// of name -> value in file when file is not "" (the file wins). The file
// must be a regular file of at most MaxSecretsFileBytes that other users
// cannot read or write (on Unix: no permission bits for group or others,
// e.g. mode 0600).
func LoadSecrets(file string, environ []string) (*Secrets, error) {
	vals := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, SecretEnvPrefix) {
			vals[strings.TrimPrefix(k, SecretEnvPrefix)] = v
		}
	}
	if file != "" {
		fromFile, err := readSecretsFile(file)
		if err != nil {
			return nil, err
		}
		for k, v := range fromFile {
			vals[k] = v
		}
	}
	s, err := NewSecrets(vals)
	if err != nil && file != "" {
		return nil, fmt.Errorf("secrets (%s and $%s*): %w", file, SecretEnvPrefix, err)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets ($%s*): %w", SecretEnvPrefix, err)
	}
	return s, nil
}

func readSecretsFile(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("secrets file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secrets file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("secrets file %s: not a regular file", file)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && goruntime.GOOS != "windows" {
		return nil, fmt.Errorf("secrets file %s: other users may access it (mode %04o); make it private: chmod 600 %s", file, perm, file)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSecretsFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("secrets file: %w", err)
	}
	if len(data) > MaxSecretsFileBytes {
		return nil, fmt.Errorf("secrets file %s: larger than %d bytes", file, MaxSecretsFileBytes)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		// (The decoder's message could quote a value: leave it out.)
		return nil, fmt.Errorf("secrets file %s: not a JSON object of name -> string value", file)
	}
	vals := make(map[string]string, len(raw))
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("secrets file %s: the value of %q is not a string", file, k)
		}
		vals[k] = s
	}
	return vals, nil
}

// Names returns the names of the secrets, sorted.
func (s *Secrets) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.names)
}

// Len is the number of secrets.
func (s *Secrets) Len() int {
	if s == nil {
		return 0
	}
	return len(s.vals)
}

func (s *Secrets) lookup(name string) (string, bool) {
	if s == nil {
		return "", false
	}
	v, ok := s.vals[name]
	return v, ok
}

// Text masks every secret value (and its JSON-escaped forms) in text.
func (s *Secrets) Text(text string) string {
	if s == nil || s.mask == nil {
		return text
	}
	return s.mask.Replace(text)
}

// JSON masks every secret value in the strings (keys included) of a JSON
// document, keeping the rest of it byte for byte; a string is rewritten
// only when it held a secret. Secrets elsewhere (in a number) are not
// masked. Text that is not JSON is masked as text.
func (s *Secrets) JSON(data []byte) []byte {
	if s == nil || s.mask == nil {
		return data
	}
	var out []byte // nil until something changes
	last := 0
	for i := 0; i < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		// A string literal from i to end (inclusive).
		end, esc := -1, false
		for k := i + 1; k < len(data); k++ {
			if data[k] == '\\' {
				esc = true
				k++
				continue
			}
			if data[k] == '"' {
				end = k
				break
			}
		}
		if end < 0 {
			// Not JSON: mask the rest as text.
			if m := s.Text(string(data[i:])); m != string(data[i:]) {
				out = append(append(out, data[last:i]...), m...)
				last = len(data)
			}
			break
		}
		lit := data[i : end+1]
		var str string
		if !esc {
			str = string(lit[1 : len(lit)-1])
		} else if json.Unmarshal(lit, &str) != nil {
			str = string(lit[1 : len(lit)-1])
		}
		if m := s.Text(str); m != str {
			out = append(append(out, data[last:i]...), jsonString(m)...)
			last = end + 1
		}
		i = end
	}
	if out == nil {
		return data
	}
	return append(out, data[last:]...)
}

// jsonString is s as a JSON string literal, without HTML escaping.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// secretInputs binds the secret inputs of an activation's input map to
// their values; a secret the worker lacks becomes an error value, so that
// only an expression that reads it fails (code secret).
// input may be bound lazily (a func decoding it on first read, eval.go's
// activation): then the secrets are bound when it is decoded.
func (j *job) secretInputs(act vars) {
	if !hasSecretInputs(j.p.w) {
		return
	}
	switch in := act["input"].(type) {
	case map[string]any:
		j.bindSecrets(in)
	case func() any:
		var once sync.Once
		act["input"] = func() any {
			v := in()
			once.Do(func() {
				if m, ok := v.(map[string]any); ok {
					j.bindSecrets(m)
				}
			})
			return v
		}
	}
}

// bindSecrets replaces the names of the secret inputs in the decoded
// input map by their values.
func (j *job) bindSecrets(in map[string]any) {
	for i := range j.p.w.Inputs {
		decl := &j.p.w.Inputs[i]
		if decl.Type.Kind != ir.KindSecret {
			continue
		}
		name, ok := in[decl.Name].(string)
		if !ok {
			continue // absent (optional)
		}
		if v, ok := j.w.opts.Secrets.lookup(name); ok {
			in[decl.Name] = v
			continue
		}
		in[decl.Name] = types.WrapErr(handlers.Errorf(CodeSecret, false,
			"input %s: secret %s is not set on worker %s (give it with --secrets-file or $%s%s)",
			decl.Name, name, j.w.opts.Consumer, SecretEnvPrefix, name))
	}
}

// hasSecretInputs reports whether a workflow declares a secret input.
func hasSecretInputs(w *ir.Workflow) bool {
	for i := range w.Inputs {
		if w.Inputs[i].Type.Kind == ir.KindSecret {
			return true
		}
	}
	return false
}

// maskHandler masks secrets in every log record of a worker: its message,
// and its string and error attributes (groups included).
type maskHandler struct {
	h slog.Handler
	s *Secrets
}

func (m maskHandler) Enabled(ctx context.Context, l slog.Level) bool { return m.h.Enabled(ctx, l) }

func (m maskHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, m.s.Text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(m.attr(a))
		return true
	})
	return m.h.Handle(ctx, out)
}

func (m maskHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, m.s.Text(v.String()))
	case slog.KindGroup:
		g := v.Group()
		attrs := make([]any, len(g))
		for i := range g {
			attrs[i] = m.attr(g[i])
		}
		return slog.Group(a.Key, attrs...)
	case slog.KindAny:
		// An error, a struct, a slice: as text, only if that held a secret.
		if text := fmt.Sprint(v.Any()); m.s.Text(text) != text {
			return slog.String(a.Key, m.s.Text(text))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (m maskHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i := range as {
		out[i] = m.attr(as[i])
	}
	return maskHandler{m.h.WithAttrs(out), m.s}
}

func (m maskHandler) WithGroup(name string) slog.Handler {
	return maskHandler{m.h.WithGroup(name), m.s}
}
