package runtime

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
)

// ScriptSource is what the runtime loads: the run scripts after step.lua
// and lib.lua, advance and begin after step.lua alone, take and admit after
// admission.lua, the others as they are; a name that is no script is an
// error.
func TestScriptSource(t *testing.T) {
	scripts, err := loadScripts()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name           string
		step, lib, adm bool
	}{
		{"complete", true, true, false}, {"start", true, true, false}, {"advance", true, false, false},
		{"begin", true, false, false}, {"promote", false, false, false}, {"release", false, false, false},
		{"take", false, false, true}, {"admit", false, false, true},
	} {
		src, err := ScriptSource(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(src, "local function tokenjson("); got != c.step {
			t.Errorf("%s: step.lua included %v, want %v", c.name, got, c.step)
		}
		if got := strings.Contains(src, "local function header()"); got != c.lib {
			t.Errorf("%s: lib.lua included %v, want %v", c.name, got, c.lib)
		}
		if got := strings.Contains(src, "local function aged("); got != c.adm {
			t.Errorf("%s: admission.lua included %v, want %v", c.name, got, c.adm)
		}
		sum := sha1.Sum([]byte(src))
		if sc := scripts[c.name]; sc == nil || sc.Hash() != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: the loaded script is not ScriptSource's", c.name)
		}
	}
	for _, name := range []string{"lib", "step", "admission", "peek", "nope"} {
		if _, err := ScriptSource(name); err == nil {
			t.Errorf("ScriptSource(%q) gave no error", name)
		}
	}
}
