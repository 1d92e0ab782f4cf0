package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const sales = `[
 {"id": 1, "region": "eu", "rep": "ann", "amount": 120, "date": "2026-01-03", "note": "order #A-17 ok"},
 {"id": 2, "region": "us", "rep": "bob", "amount": 80.5, "date": "2026-01-05", "note": "order #B-2"},
 {"id": 3, "region": "eu", "rep": "cid", "amount": 300, "date": "2026-02-01", "note": "none"},
 {"id": 4, "region": "apac", "rep": "ann", "amount": null, "date": "bad", "customer": {"tier": "gold"}}
]`

// TestPrimitives runs each primitive, once per case, as a one-step
// pipeline over sales (or the case's input).
func TestPrimitives(t *testing.T) {
	tests := []struct {
		name    string
		input   string // default sales
		step    string
		want    string
		errCode string
		errSub  string
	}{
		// table_sort
		{name: "sort asc", step: `{"step":"table_sort","field":"amount"}`,
			want: `[4,2,1,3]`},
		{name: "sort desc", step: `{"step":"table_sort","field":"amount","order":"desc"}`,
			want: `[3,1,2,4]`},
		{name: "sort two keys", step: `{"step":"table_sort","by":[{"field":"rep"},{"field":"amount","order":"desc"}]}`,
			want: `[1,4,2,3]`},
		{name: "sort bad order", step: `{"step":"table_sort","field":"amount","order":"up"}`, errCode: CodeBadArgs, errSub: `order "up"`},
		{name: "sort misspelt", step: `{"step":"table_sort","feild":"amount"}`, errCode: CodeBadArgs, errSub: `unknown field "feild"`},
		{name: "sort not a table", input: `{"a":1}`, step: `{"step":"table_sort","field":"a"}`, errCode: CodeBadArgs, errSub: "needs an array of objects; its input is an object"},
		{name: "sort array of numbers", input: `[1,2]`, step: `{"step":"table_sort","field":"a"}`, errCode: CodeBadArgs, errSub: "element 0 is a number"},

		// table_filter
		{name: "filter gt", step: `{"step":"table_filter","where":[{"field":"amount","op":"gt","value":100}]}`, want: `[1,3]`},
		{name: "filter and", step: `{"step":"table_filter","where":[{"field":"region","op":"eq","value":"eu"},{"field":"amount","op":"lt","value":200}]}`, want: `[1]`},
		{name: "filter any", step: `{"step":"table_filter","any":true,"where":[{"field":"region","op":"eq","value":"us"},{"field":"rep","op":"eq","value":"cid"}]}`, want: `[2,3]`},
		{name: "filter in", step: `{"step":"table_filter","where":[{"field":"id","op":"in","value":[2,4,9]}]}`, want: `[2,4]`},
		{name: "filter eq int float", step: `{"step":"table_filter","where":[{"field":"amount","op":"eq","value":120.0}]}`, want: `[1]`},
		{name: "filter dotted exists", step: `{"step":"table_filter","where":[{"field":"customer.tier","op":"exists"}]}`, want: `[4]`},
		{name: "filter matches", step: `{"step":"table_filter","where":[{"field":"note","op":"matches","value":"#[AB]-\\d+"}]}`, want: `[1,2]`},
		{name: "filter lt ignores other kinds", step: `{"step":"table_filter","where":[{"field":"amount","op":"lt","value":"z"}]}`, want: `[]`},
		{name: "filter bad op", step: `{"step":"table_filter","where":[{"field":"a","op":"like","value":1}]}`, errCode: CodeBadArgs, errSub: `op "like"`},
		{name: "filter in needs array", step: `{"step":"table_filter","where":[{"field":"a","op":"in","value":1}]}`, errCode: CodeBadArgs, errSub: "needs an array"},
		{name: "filter bad regex", step: `{"step":"table_filter","where":[{"field":"a","op":"matches","value":"(("}]}`, errCode: CodeBadArgs, errSub: "RE2"},

		// table_select
		{name: "select rename", input: `[{"a":1,"b":{"c":2},"d":3}]`, step: `{"step":"table_select","fields":["a","b.c"],"rename":{"b.c":"c"}}`,
			want: `[{"a":1,"c":2}]`},
		{name: "select missing is null", input: `[{"a":1}]`, step: `{"step":"table_select","fields":["a","z"]}`, want: `[{"a":1,"z":null}]`},
		{name: "select rename unknown", input: `[{"a":1}]`, step: `{"step":"table_select","fields":["a"],"rename":{"q":"r"}}`, errCode: CodeBadArgs, errSub: "not among fields"},
		{name: "select no fields", step: `{"step":"table_select","fields":[]}`, errCode: CodeBadArgs, errSub: "give fields"},

		// top_k
		{name: "top_k first", step: `{"step":"top_k","k":2}`, want: `[1,2]`},
		{name: "top_k by", step: `{"step":"top_k","k":2,"by":"amount"}`, want: `[3,1]`},
		{name: "top_k asc", step: `{"step":"top_k","k":1,"by":"amount","order":"asc"}`, want: `[4]`},
		{name: "top_k more than rows", input: `[1,2]`, step: `{"step":"top_k","k":5}`, want: `[1,2]`},
		{name: "top_k negative", step: `{"step":"top_k","k":-1}`, errCode: CodeBadArgs, errSub: "give k"},
		{name: "top_k missing k", step: `{"step":"top_k"}`, errCode: CodeBadArgs, errSub: "give k"},

		// groupby
		{name: "groupby sum count", step: `{"step":"groupby","by":"region","aggregates":[{"op":"count"},{"op":"sum","field":"amount"},{"op":"max","field":"amount","as":"top"}]}`,
			want: `[{"region":"eu","count":2,"sum_amount":420,"top":300},{"region":"us","count":1,"sum_amount":80.5,"top":80.5},{"region":"apac","count":1,"sum_amount":0,"top":null}]`},
		{name: "groupby two keys avg", input: `[{"a":1,"b":"x","v":1},{"a":1,"b":"x","v":3},{"a":1,"b":"y","v":5}]`,
			step: `{"step":"groupby","by":["a","b"],"aggregates":[{"op":"avg","field":"v"},{"op":"collect","field":"v"},{"op":"count_distinct","field":"v"}]}`,
			want: `[{"a":1,"b":"x","avg_v":2,"collect_v":[1,3],"count_distinct_v":2},{"a":1,"b":"y","avg_v":5,"collect_v":[5],"count_distinct_v":1}]`},
		{name: "groupby default count", input: `[{"k":1},{"k":1}]`, step: `{"step":"groupby","by":"k"}`, want: `[{"k":1,"count":2}]`},
		{name: "groupby sum of strings", input: `[{"k":1,"v":"abc"}]`, step: `{"step":"groupby","by":"k","aggregates":[{"op":"sum","field":"v"}]}`, errCode: CodeBadArgs, errSub: `"abc" is not a number`},
		{name: "groupby bad op", step: `{"step":"groupby","by":"k","aggregates":[{"op":"median","field":"v"}]}`, errCode: CodeBadArgs, errSub: `op "median"`},
		{name: "groupby no by", step: `{"step":"groupby"}`, errCode: CodeBadArgs, errSub: "give by"},
		{name: "groupby name clash", step: `{"step":"groupby","by":"count","aggregates":[{"op":"count"}]}`, errCode: CodeBadArgs, errSub: "is a group field"},

		// join
		{name: "join inner", input: `[{"id":1,"n":"a"},{"id":2,"n":"b"},{"id":3,"n":"c"}]`,
			step: `{"step":"join","right":[{"id":1,"x":10},{"id":1.0,"x":11},{"id":3,"n":"C"}],"on":"id"}`,
			want: `[{"id":1,"n":"a","x":10},{"id":1,"n":"a","x":11},{"id":3,"n":"c","right_n":"C"}]`},
		{name: "join left", input: `[{"id":1},{"id":2},{"id":null}]`,
			step: `{"step":"join","right":[{"k":1,"x":10},{"k":null,"x":0}],"left_on":"id","right_on":"k","type":"left"}`,
			want: `[{"id":1,"k":1,"x":10},{"id":2},{"id":null}]`},
		{name: "join bad type", step: `{"step":"join","right":[],"on":"id","type":"outer"}`, errCode: CodeBadArgs, errSub: `type "outer"`},
		{name: "join no right", step: `{"step":"join","on":"id"}`, errCode: CodeBadArgs, errSub: "give right"},
		{name: "join key count", step: `{"step":"join","right":[],"left_on":["a","b"],"right_on":"a"}`, errCode: CodeBadArgs, errSub: "left_on has 2 fields"},

		// jq_transform
		{name: "jq map", step: `{"step":"jq_transform","program":"map(.id)"}`, want: `[1,2,3,4]`},
		{name: "jq all", input: `[1,2,3]`, step: `{"step":"jq_transform","program":".[] | . * 2","all":true}`, want: `[2,4,6]`},
		{name: "jq several without all", input: `[1,2]`, step: `{"step":"jq_transform","program":".[]"}`, errCode: CodeFailed, errSub: "emitted 2 values"},
		{name: "jq env is empty", input: `null`, step: `{"step":"jq_transform","program":"[env, $ENV] | map(length)"}`, want: `[0,0]`},
		{name: "jq parse error", step: `{"step":"jq_transform","program":"map(."}`, errCode: CodeBadArgs, errSub: "does not parse"},
		{name: "jq runtime error", input: `"x"`, step: `{"step":"jq_transform","program":".a"}`, errCode: CodeFailed, errSub: "jq:"},
		{name: "jq input refused", step: `{"step":"jq_transform","program":"input"}`, errCode: CodeBadArgs, errSub: "not allowed"},
		{name: "jq infinite", input: `0`, step: `{"step":"jq_transform","program":"last(repeat(.))"}`, errCode: CodeTimeout, errSub: "did not finish"},
		{name: "jq too many outputs", input: `0`, step: `{"step":"jq_transform","program":"range(100000)","all":true}`, errCode: CodeTooLarge, errSub: "more than 10000 values"},
		{name: "jq huge output", input: `"x"`, step: `{"step":"jq_transform","program":"[range(3000) | \"x\" * 3000]"}`, errCode: CodeTooLarge, errSub: "bytes"},
		{name: "jq no debug", input: `0`, step: `{"step":"jq_transform","program":"debug"}`, errCode: CodeBadArgs, errSub: "not defined: debug"},
		{name: "jq no modules", input: `0`, step: `{"step":"jq_transform","program":"import \"a\" as a; 1"}`, errCode: CodeBadArgs, errSub: "cannot load module"},
		{name: "jq nan", input: `0`, step: `{"step":"jq_transform","program":"nan"}`, errCode: CodeFailed, errSub: "cannot be written as JSON"},
		{name: "jq deep output", input: `0`, step: `{"step":"jq_transform","program":"reduce range(100) as $i (0; [.])"}`, errCode: CodeTooLarge, errSub: "nested deeper"},

		// regex_extract
		{name: "regex string", input: `"total: 42 EUR"`, step: `{"step":"regex_extract","pattern":"\\d+"}`, want: `"42"`},
		{name: "regex named groups", input: `"2026-11-27"`, step: `{"step":"regex_extract","pattern":"(?P<y>\\d{4})-(?P<m>\\d\\d)"}`, want: `{"y":"2026","m":"11"}`},
		{name: "regex all groups", input: `"a=1 b=2"`, step: `{"step":"regex_extract","pattern":"(\\w)=(\\d)","all":true}`, want: `[["a","1"],["b","2"]]`},
		{name: "regex no match", input: `"abc"`, step: `{"step":"regex_extract","pattern":"\\d"}`, want: `null`},
		{name: "regex on field", input: `[{"note":"order #A-17"},{"note":7}]`, step: `{"step":"regex_extract","field":"note","pattern":"#([A-Z])-(\\d+)","into":"code"}`,
			want: `[{"note":"order #A-17","code":["A","17"]},{"note":7,"code":null}]`},
		{name: "regex bad", input: `"a"`, step: `{"step":"regex_extract","pattern":"a(?=b)"}`, errCode: CodeBadArgs, errSub: "RE2"},
		{name: "regex too long", input: `"a"`, step: fmt.Sprintf(`{"step":"regex_extract","pattern":%q}`, strings.Repeat("a", 1001)), errCode: CodeBadArgs, errSub: "at most 1000"},
		{name: "regex too many matches", input: fmt.Sprintf("%q", strings.Repeat("a", 20000)), step: `{"step":"regex_extract","pattern":"a","all":true}`, errCode: CodeTooLarge, errSub: "more than 10000 matches"},
		{name: "regex needs string", input: `[1]`, step: `{"step":"regex_extract","pattern":"a"}`, errCode: CodeBadArgs, errSub: "reads a string"},
		{name: "regex pathological is linear", input: fmt.Sprintf("%q", strings.Repeat("a", 5000)+"!"), step: `{"step":"regex_extract","pattern":"^(a+)+$"}`, want: `null`},

		// parse_date
		{name: "date default formats", input: `"2026-03-01T10:00:00+02:00"`, step: `{"step":"parse_date"}`, want: `"2026-03-01T08:00:00Z"`},
		{name: "date timezone in", input: `"2026-03-01 10:00:00"`, step: `{"step":"parse_date","timezone":"Europe/Paris","output_timezone":"UTC"}`, want: `"2026-03-01T09:00:00Z"`},
		{name: "date unix out", input: `"2026-01-01"`, step: `{"step":"parse_date","output":"unix"}`, want: `1767225600`},
		{name: "date unix in", input: `1767225600`, step: `{"step":"parse_date","output":"date"}`, want: `"2026-01-01"`},
		{name: "date unix_ms in", input: `"1767225600500"`, step: `{"step":"parse_date","formats":["unix_ms"],"output":"rfc3339nano"}`, want: `"2026-01-01T00:00:00.5Z"`},
		{name: "date go layout", input: `"27/11/2026"`, step: `{"step":"parse_date","formats":["02/01/2006"],"output":"Mon Jan 2 2006"}`, want: `"Fri Nov 27 2026"`},
		{name: "date field on_error null", step: `{"step":"parse_date","field":"date","into":"day","output":"Jan 2","on_error":"null"}`,
			want: `[1,2,3,4]`},
		{name: "date field fails", step: `{"step":"parse_date","field":"date"}`, errCode: CodeFailed, errSub: `row 3: "bad" matches none`},
		{name: "date bad tz", input: `"2026-01-01"`, step: `{"step":"parse_date","timezone":"Mars/Base"}`, errCode: CodeBadArgs, errSub: "IANA"},
		{name: "date tz path", input: `"2026-01-01"`, step: `{"step":"parse_date","timezone":"../../etc/passwd"}`, errCode: CodeBadArgs, errSub: "IANA"},
		{name: "date bad format", input: `"2026-01-01"`, step: `{"step":"parse_date","formats":["YYYY-MM-DD"]}`, errCode: CodeBadArgs, errSub: "Go layout"},
		{name: "date number without unix", input: `5`, step: `{"step":"parse_date","formats":["date"]}`, errCode: CodeFailed, errSub: "add \"unix\""},
		{name: "date huge unix", input: `1e300`, step: `{"step":"parse_date"}`, errCode: CodeFailed, errSub: "out of range"},
	}
	ts := toolset(t, Config{}, Env{Blobs: &memBlobs{}})
	pl := ts[ExecutePipeline]
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.input
			if in == "" {
				in = sales
			}
			got, err := runPipeline(t, pl, `{"input":`+in+`,"steps":[`+tc.step+`]}`)
			if tc.errCode != "" || tc.errSub != "" {
				wantErr(t, err, tc.errCode, tc.errSub)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			// A want of ids only stands for the rows with those ids, in order.
			if strings.HasPrefix(want, "[") && !strings.Contains(want, "{") && (in == sales) && !strings.Contains(tc.step, "jq_transform") {
				got = ids(t, got)
			}
			if !jsonEq(t, got, want) {
				t.Errorf("got %s\nwant %s", got, want)
			}
		})
	}
}

// ids maps a table's rows to their ids.
func ids(t *testing.T, table json.RawMessage) json.RawMessage {
	t.Helper()
	var rs []map[string]any
	if err := json.Unmarshal(table, &rs); err != nil {
		t.Fatalf("not a table: %s", table)
	}
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = r["id"]
	}
	b, _ := json.Marshal(out)
	return b
}

// TestPipelineChaining: steps read the previous result, from: N reads an
// earlier one, a join's right may be {"$step": N}, and inputs are never
// changed by later steps.
func TestPipelineChaining(t *testing.T) {
	ts := toolset(t, Config{}, Env{Blobs: &memBlobs{}})
	pl := ts[ExecutePipeline]
	got, err := runPipeline(t, pl, `{"input": `+sales+`, "steps": [
	  {"step": "table_filter", "where": [{"field": "amount", "op": "exists"}, {"field":"amount","op":"ne","value":null}]},
	  {"step": "groupby", "by": "rep", "aggregates": [{"op": "sum", "field": "amount", "as": "total"}]},
	  {"step": "join", "from": 1, "right": {"$step": 2}, "on": "rep"},
	  {"step": "regex_extract", "field": "note", "pattern": "#(?P<code>[A-Z])", "into": "m"},
	  {"step": "table_select", "fields": ["id", "total", "m.code"], "rename": {"m.code": "code"}},
	  {"step": "table_sort", "field": "total", "order": "desc"},
	  {"step": "top_k", "k": 2}
	]}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"id":3,"total":300,"code":null},{"id":1,"total":120,"code":"A"}]`; !jsonEq(t, got, want) {
		t.Errorf("got %s, want %s", got, want)
	}
	_, err = runPipeline(t, pl, `{"steps":[{"step":"top_k","k":1,"from":1}]}`)
	wantErr(t, err, CodeBadArgs, "from is 1")
	_, err = runPipeline(t, pl, `{"input":[],"steps":[{"step":"join","on":"a","right":{"$step":5}}]}`)
	wantErr(t, err, CodeBadArgs, "$step must name")
	_, err = runPipeline(t, pl, `{"input":[],"steps":[{"step":"sql","q":"x"}]}`)
	wantErr(t, err, CodeBadArgs, "/steps/0/step")
}

// TestPipelineBlobs: a result larger than MaxResultBytes comes back as a
// reference, which a later pipeline reads as its input or a join's
// right; an unknown or malformed reference is an error.
func TestPipelineBlobs(t *testing.T) {
	blobs := &memBlobs{}
	ts := toolset(t, Config{Limits: Limits{MaxResultBytes: 2048}}, Env{Blobs: blobs})
	pl := ts[ExecutePipeline]
	big := `[` + strings.TrimSuffix(strings.Repeat(`{"k":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},`, 100), ",") + `]`
	res, err := runPipeline(t, pl, `{"input":`+big+`,"steps":[{"step":"table_select","fields":["k","pad"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	var ref blobRef
	if err := json.Unmarshal(res, &ref); err != nil || !validRef(ref.Ref) || ref.Bytes < 2048 || ref.Preview == "" {
		t.Fatalf("result %s is not a reference (%v)", res, err)
	}
	got, err := runPipeline(t, pl, `{"input":{"$ref":"`+ref.Ref+`"},"steps":[{"step":"groupby","by":"k"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEq(t, got, `[{"k":1,"count":100}]`) {
		t.Errorf("got %s", got)
	}
	got, err = runPipeline(t, pl, `{"input":[{"k":1}],"steps":[{"step":"join","on":"k","right":{"$ref":"`+ref.Ref+`"}},{"step":"groupby","by":"k"}]}`)
	if err != nil || !jsonEq(t, got, `[{"k":1,"count":100}]`) {
		t.Errorf("join with a reference: %s, %v", got, err)
	}
	_, err = runPipeline(t, pl, `{"input":{"$ref":"sha256:`+strings.Repeat("0", 64)+`"},"steps":[{"step":"top_k","k":1}]}`)
	wantErr(t, err, CodeFailed, "unknown reference")
	_, err = runPipeline(t, pl, `{"input":{"$ref":"../etc"},"steps":[{"step":"top_k","k":1}]}`)
	wantErr(t, err, CodeBadArgs, "is not a reference")

	// Many steps: the reports shrink, and the result stays inline.
	ts2 := toolset(t, Config{Limits: Limits{MaxResultBytes: 600}}, Env{Blobs: blobs})
	many := strings.TrimSuffix(strings.Repeat(`{"step":"top_k","k":1},`, 30), ",")
	out, err := ts2[ExecutePipeline].Call(context.Background(), json.RawMessage(`{"input":[{"a":1},{"a":2}],"steps":[`+many+`]}`))
	if err != nil || !jsonEq(t, out, `{"result":[{"a":1}],"steps":[{"step":"top_k","rows":1,"bytes":9}],"steps_omitted":29}`) {
		t.Errorf("many steps: %s, %v", out, err)
	}

	// Without a BlobStore, a large result is refused with advice.
	ts = toolset(t, Config{Limits: Limits{MaxResultBytes: 2048}}, Env{})
	_, err = runPipeline(t, ts[ExecutePipeline], `{"input":`+big+`,"steps":[{"step":"top_k","k":100}]}`)
	wantErr(t, err, CodeTooLarge, "stores no large results")
}

// TestHostileArguments: oversized, deeply nested, malformed and
// schema-breaking arguments are errors the model can read.
func TestHostileArguments(t *testing.T) {
	ts := toolset(t, Config{Limits: Limits{MaxRows: 1000, MaxBlobBytes: 2000 + 2}}, Env{Blobs: &memBlobs{}})
	pl := ts[ExecutePipeline]
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	cases := []struct {
		name, args, code, sub string
	}{
		{"deep", `{"input":` + deep + `,"steps":[{"step":"top_k","k":1}]}`, CodeBadArgs, "nested deeper than 64"},
		{"huge", `{"input":"` + strings.Repeat("x", 300<<10) + `","steps":[{"step":"top_k","k":1}]}`, CodeBadArgs, "at most 262144"},
		{"not json", `{"steps":`, CodeBadArgs, "not valid JSON"},
		{"huge number", `{"input":1e400,"steps":[{"step":"top_k","k":1}]}`, CodeBadArgs, "1e400 is out of range"},
		{"two values", `{} {}`, CodeBadArgs, "more than one JSON value"},
		{"no steps", `{}`, CodeBadArgs, "missing property 'steps'"},
		{"extra", `{"steps":[{"step":"top_k","k":1}],"x":1}`, CodeBadArgs, "additional properties 'x'"},
		{"steps not array", `{"steps":"top_k"}`, CodeBadArgs, "/steps"},
		{"too many steps", `{"steps":[` + strings.TrimSuffix(strings.Repeat(`{"step":"top_k","k":1},`, 40), ",") + `]}`, CodeBadArgs, "at most 32"},
		{"kept results", `{"input":"` + strings.Repeat("x", 2000) + `","steps":[` + strings.TrimSuffix(strings.Repeat(`{"step":"jq_transform","program":"."},`, 5), ",") + `]}`, CodeTooLarge, "step 5 (jq_transform): the pipeline's results so far are more than 8008 bytes"},
		{"join blowup", `{"input":` + rowsOf(100) + `,"steps":[{"step":"join","right":{"$step":0},"on":"k"}]}`, CodeTooLarge, "more than 1000 rows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := runPipeline(t, pl, c.args)
			wantErr(t, err, c.code, c.sub)
		})
	}
}

func rowsOf(n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"k":1}`)
	}
	b.WriteString("]")
	return b.String()
}
