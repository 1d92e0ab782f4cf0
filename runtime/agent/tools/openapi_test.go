package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// petstore writes testdata/petstore.yaml with its server at base.
func petstore(t *testing.T, base string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/petstore.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "petstore.yaml")
	if err := os.WriteFile(f, []byte(strings.ReplaceAll(string(b), "SERVER_URL", base)), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestOpenAPIAction(t *testing.T) {
	var mu sync.Mutex
	var seen []string // method, path?query, header, body of each request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s rid=%s %s", r.Method, r.URL.RequestURI(), r.Header.Get("X-Request-Id"), b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/pets" && r.Method == "POST":
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"id": 3, "new": %s}`, b)
		case r.URL.Path == "/v1/pets":
			io.WriteString(w, `[{"id":1,"name":"rex"},{"id":2,"name":"tom"}]`)
		case strings.HasPrefix(r.URL.Path, "/v1/pets/"):
			fmt.Fprintf(w, `{"id": %s}`, strings.TrimPrefix(r.URL.Path, "/v1/pets/"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	doc := petstore(t, srv.URL)
	oa := toolset(t, Config{HTTPAllow: []string{hostPort(t, srv)}, OpenAPI: []string{doc}}, Env{})[OpenAPIAction]

	if d := oa.Description(); !strings.Contains(d, "getPet: GET /pets/{petId}") || !strings.Contains(d, "petId (path, required)") {
		t.Errorf("description does not list the operations: %s", d)
	}
	ok := []struct{ name, args, want, sent string }{
		{"query", `{"operation_id":"listPets","params":{"limit":2,"tag":["a","b"]}}`,
			`{"operation_id":"listPets","body":[{"id":1,"name":"rex"},{"id":2,"name":"tom"}]}`, "GET /v1/pets?limit=2&tag=a&tag=b rid= "},
		{"path", `{"operation_id":"getPet","params":{"petId":7}}`, `{"operation_id":"getPet","body":{"id":7}}`, "GET /v1/pets/7 rid= "},
		{"body and header", `{"api":"Petstore","operation_id":"createPet","params":{"X-Request-Id":"r-1"},"body":{"name":"kit"}}`,
			`{"operation_id":"createPet","body":{"id":3,"new":{"name":"kit"}}}`, `POST /v1/pets rid=r-1 {"name":"kit"}`},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			got, err := oa.Call(context.Background(), json.RawMessage(c.args))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEq(t, got, c.want) {
				t.Errorf("got %s, want %s", got, c.want)
			}
			if len(seen) != 1 || seen[0] != c.sent {
				t.Errorf("sent %q, want %q", seen, c.sent)
			}
		})
	}
	bad := []struct{ name, args, code, sub string }{
		{"not an integer", `{"operation_id":"listPets","params":{"limit":"many"}}`, CodeBadArgs, `query parameter "limit"`},
		{"over maximum", `{"operation_id":"listPets","params":{"limit":1000}}`, CodeBadArgs, `query parameter "limit"`},
		{"path not integer", `{"operation_id":"getPet","params":{"petId":"x/../../admin"}}`, CodeBadArgs, `path parameter "petId"`},
		{"missing path param", `{"operation_id":"getPet"}`, CodeBadArgs, "needs its path parameters"},
		{"body missing field", `{"operation_id":"createPet","body":{"tag":"x"}}`, CodeBadArgs, "body"},
		{"body extra field", `{"operation_id":"createPet","body":{"name":"a","owner":"me"}}`, CodeBadArgs, "body"},
		{"body required", `{"operation_id":"createPet"}`, CodeBadArgs, "body"},
		{"body not taken", `{"operation_id":"getPet","params":{"petId":1},"body":{"a":1}}`, CodeBadArgs, "takes no body"},
		{"unknown param", `{"operation_id":"listPets","params":{"sort":"name"}}`, CodeBadArgs, `no parameter "sort"; its parameters are: limit, tag`},
		{"object param", `{"operation_id":"listPets","params":{"limit":{"a":1}}}`, CodeBadArgs, "not an object"},
		{"unknown operation", `{"operation_id":"deletePet"}`, CodeDenied, `no allow-listed API has operation "deletePet"`},
		{"unknown api", `{"api":"Other","operation_id":"listPets"}`, CodeDenied, "no allow-listed API"},
		{"schema", `{"operationId":"listPets"}`, CodeBadArgs, "missing property 'operation_id'"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			_, err := oa.Call(context.Background(), json.RawMessage(c.args))
			wantErr(t, err, c.code, c.sub)
			if len(seen) != 0 {
				t.Errorf("a refused request was sent: %q", seen)
			}
		})
	}
}

// TestOpenAPIDocuments: a document is refused at worker start when its
// server is not allow-listed, it is not valid, or it refers outside
// itself; a worker without documents says it allows no APIs.
func TestOpenAPIDocuments(t *testing.T) {
	doc := petstore(t, "http://127.0.0.1:9")
	if _, err := NewWorker(Config{OpenAPI: []string{doc}}); err == nil || !strings.Contains(err.Error(), "is not on the worker's allow-list") {
		t.Errorf("server not allowed: %v", err)
	}
	if _, err := NewWorker(Config{HTTPAllow: []string{"127.0.0.1"}, OpenAPI: []string{doc}}); err != nil {
		t.Errorf("server allowed: %v", err)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		f := filepath.Join(dir, name)
		os.WriteFile(f, []byte(text), 0o600)
		return f
	}
	secret := write("secret.yaml", "type: string\n")
	cases := map[string]string{
		"not openapi":  write("a.yaml", "hello: world\n"),
		"external ref": write("b.yaml", "openapi: 3.0.3\ninfo: {title: x, version: '1'}\nservers: [{url: 'http://127.0.0.1/'}]\npaths:\n  /a:\n    get:\n      operationId: a\n      parameters: [{name: q, in: query, schema: {$ref: '"+secret+"'}}]\n      responses: {'200': {description: ok}}\n"),
		"no server":    write("c.yaml", "openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths: {}\n"),
		"relative":     write("d.yaml", "openapi: 3.0.3\ninfo: {title: x, version: '1'}\nservers: [{url: /v1}]\npaths: {}\n"),
		"missing file": filepath.Join(dir, "nope.yaml"),
	}
	for name, f := range cases {
		if _, err := NewWorker(Config{HTTPAllow: []string{"127.0.0.1"}, OpenAPI: []string{f}}); err == nil || !strings.Contains(err.Error(), "--agent-openapi") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	oa := toolset(t, Config{}, Env{})[OpenAPIAction]
	if !strings.Contains(oa.Description(), "allows no APIs") {
		t.Errorf("description: %s", oa.Description())
	}
}

// TestOpenAPICredentials: the worker's headers for an API reach it on
// every call, override the model's, and never show in a result or an
// error.
func TestOpenAPICredentials(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-Request-Id"))
		if r.URL.Path == "/v1/pets/13" {
			http.Error(w, "unlucky", 500)
			return
		}
		io.WriteString(w, `{"ok": true}`)
	}))
	defer srv.Close()
	doc := petstore(t, srv.URL)
	cfg := Config{HTTPAllow: []string{hostPort(t, srv)}, OpenAPI: []string{doc},
		OpenAPIHeaders: map[string]map[string]string{doc: {"X-Request-Id": "s3cret"}}}
	oa := toolset(t, cfg, Env{})[OpenAPIAction]
	if strings.Contains(oa.Description(), "s3cret") {
		t.Error("the description shows the credential")
	}
	out, err := oa.Call(context.Background(), json.RawMessage(`{"operation_id":"createPet","params":{"X-Request-Id":"mine"},"body":{"name":"a"}}`))
	if err != nil || strings.Contains(string(out), "s3cret") {
		t.Fatalf("got %s, %v", out, err)
	}
	_, err = oa.Call(context.Background(), json.RawMessage(`{"operation_id":"getPet","params":{"petId":13}}`))
	wantErr(t, err, CodeFailed, "HTTP 500: unlucky")
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the credential: %v", err)
	}
	if len(got) != 2 || got[0] != "s3cret" || got[1] != "s3cret" {
		t.Errorf("the server got %q", got)
	}
	cfg.OpenAPIHeaders = map[string]map[string]string{doc: {"X-Evil": "a\r\nHost: b"}}
	if _, err := NewWorker(cfg); err == nil {
		t.Error("a header value with CRLF was accepted")
	}
}
