package tasksapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wfc-lang/wfc/runtime"
)

// The fragment describes what the code sends and reads: each schema's
// properties are exactly the JSON fields of its Go type, and it has the
// handler's paths.
func TestOpenAPIFragment(t *testing.T) {
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
		Comps   struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	for _, p := range []string{"/v1/tasks/poll", "/v1/tasks/{id}/heartbeat", "/v1/tasks/{id}/complete", "/v1/tasks/{id}/fail"} {
		if doc.Paths[p]["post"] == nil {
			t.Errorf("no POST %s", p)
		}
	}
	for name, v := range map[string]any{
		"PollRequest": PollRequest{}, "Task": runtime.RemoteTask{}, "LeaseRequest": LeaseRequest{}, "HeartbeatResponse": HeartbeatResponse{},
		"CompleteRequest": CompleteRequest{}, "FailRequest": FailRequest{}, "TaskError": runtime.TaskError{}, "Problem": Problem{},
	} {
		s, ok := doc.Comps.Schemas[name]
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		var fields, props []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, tag)
		}
		for p := range s.Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if !slices.Equal(fields, props) {
			t.Errorf("schema %s has %v, the Go type %v", name, props, fields)
		}
		for _, r := range s.Required {
			if !slices.Contains(fields, r) {
				t.Errorf("schema %s requires %s, which the Go type lacks", name, r)
			}
		}
	}
}
