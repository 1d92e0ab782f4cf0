package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/itchyny/gojq"
)

// rows returns in as a table: an array of objects.
func rows(in any, step string) ([]map[string]any, error) {
	arr, ok := in.([]any)
	if !ok {
		return nil, errorf(CodeBadArgs, "%s needs an array of objects; its input is %s (pick the array first, e.g. jq_transform with \".items\")", step, kindOf(in))
	}
	out := make([]map[string]any, len(arr))
	for i, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, errorf(CodeBadArgs, "%s needs an array of objects; element %d is %s", step, i, kindOf(e))
		}
		out[i] = m
	}
	return out, nil
}

func fromRows(rs []map[string]any) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// field reads a field of a row: the key itself if the row has it, else a
// dotted path ("customer.address.city") through nested objects.
func field(r map[string]any, path string) (any, bool) {
	if v, ok := r[path]; ok {
		return v, true
	}
	cur := any(r)
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// rank orders JSON kinds as jq does: null < false < true < numbers <
// strings < arrays < objects.
func rank(v any) int {
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 2
		}
		return 1
	case int, float64:
		return 3
	case string:
		return 4
	case []any:
		return 5
	}
	return 6
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// compare orders any two JSON values (jq's order; arrays element-wise,
// objects by their encoding, which is enough for a total order).
func compare(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return cmp.Compare(ra, rb)
	}
	switch x := a.(type) {
	case int:
		if y, ok := b.(int); ok {
			return cmp.Compare(x, y)
		}
		fa, _ := num(a)
		fb, _ := num(b)
		return cmp.Compare(fa, fb)
	case float64:
		fb, _ := num(b)
		return cmp.Compare(x, fb)
	case string:
		return strings.Compare(x, b.(string))
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := compare(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(x), len(y))
	case map[string]any:
		ja, _ := json.Marshal(x)
		jb, _ := json.Marshal(b)
		return strings.Compare(string(ja), string(jb))
	}
	return 0
}

func equal(a, b any) bool { return rank(a) == rank(b) && compare(a, b) == 0 }

type sortKey struct {
	Field string `json:"field"`
	Order string `json:"order"`
}

func (k sortKey) check(step string) error {
	if k.Field == "" {
		return errorf(CodeBadArgs, "%s: a sort key needs a field", step)
	}
	if k.Order != "" && k.Order != "asc" && k.Order != "desc" {
		return errorf(CodeBadArgs, "%s: order %q: use \"asc\" or \"desc\"", step, k.Order)
	}
	return nil
}

func sortRows(rs []map[string]any, keys []sortKey) {
	slices.SortStableFunc(rs, func(a, b map[string]any) int {
		for _, k := range keys {
			va, _ := field(a, k.Field)
			vb, _ := field(b, k.Field)
			c := compare(va, vb)
			if k.Order == "desc" {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

// tableSort: {"by": [{"field", "order"}...]} or {"field", "order"}; a
// stable sort, missing fields as null.
func tableSort(raw json.RawMessage, in any) (any, error) {
	var a struct {
		Step  string    `json:"step"`
		From  *int      `json:"from"`
		Field string    `json:"field"`
		Order string    `json:"order"`
		By    []sortKey `json:"by"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	keys := a.By
	if a.Field != "" {
		keys = append([]sortKey{{a.Field, a.Order}}, keys...)
	}
	if len(keys) == 0 {
		return nil, errorf(CodeBadArgs, "give field (and order) or by: [{field, order}]")
	}
	for _, k := range keys {
		if err := k.check("table_sort"); err != nil {
			return nil, err
		}
	}
	rs, err := rows(in, "table_sort")
	if err != nil {
		return nil, err
	}
	rs = slices.Clone(rs)
	sortRows(rs, keys)
	return fromRows(rs), nil
}

type condition struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value any    `json:"value"`
	re    *regexp.Regexp
}

var filterOps = []string{"eq", "ne", "lt", "lte", "gt", "gte", "in", "not_in", "contains", "starts_with", "ends_with", "matches", "exists", "not_exists"}

// tableFilter keeps the rows that meet every condition of where (or, with
// "any": true, at least one).
func tableFilter(raw json.RawMessage, in any, lim Limits) (any, error) {
	var a struct {
		Step  string      `json:"step"`
		From  *int        `json:"from"`
		Where []condition `json:"where"`
		Any   bool        `json:"any"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if len(a.Where) == 0 {
		return nil, errorf(CodeBadArgs, "give where: [{field, op, value}]")
	}
	for i := range a.Where {
		c := &a.Where[i]
		c.Value = normalizeAny(c.Value)
		if c.Field == "" {
			return nil, errorf(CodeBadArgs, "where[%d] needs a field", i)
		}
		if !slices.Contains(filterOps, c.Op) {
			return nil, errorf(CodeBadArgs, "where[%d]: op %q: use one of %s", i, c.Op, strings.Join(filterOps, ", "))
		}
		switch c.Op {
		case "in", "not_in":
			if _, ok := c.Value.([]any); !ok {
				return nil, errorf(CodeBadArgs, "where[%d]: %s needs an array value", i, c.Op)
			}
		case "starts_with", "ends_with":
			if _, ok := c.Value.(string); !ok {
				return nil, errorf(CodeBadArgs, "where[%d]: %s needs a string value", i, c.Op)
			}
		case "matches":
			s, ok := c.Value.(string)
			if !ok {
				return nil, errorf(CodeBadArgs, "where[%d]: matches needs a regular expression (a string)", i)
			}
			re, err := compileRegex(s, lim)
			if err != nil {
				return nil, err
			}
			c.re = re
		}
	}
	rs, err := rows(in, "table_filter")
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, r := range rs {
		keep := !a.Any
		for _, c := range a.Where {
			ok := c.test(r)
			if a.Any && ok {
				keep = true
				break
			}
			if !a.Any && !ok {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, r)
		}
	}
	return out, nil
}

// normalizeAny turns the float64s encoding/json makes into ints where
// they are integers, as decodeJSON does.
func normalizeAny(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	n, err := decodeJSON(b, 1000)
	if err != nil {
		return v
	}
	return n
}

func (c condition) test(r map[string]any) bool {
	v, present := field(r, c.Field)
	switch c.Op {
	case "exists":
		return present
	case "not_exists":
		return !present
	case "eq":
		return present && equal(v, c.Value)
	case "ne":
		return !present || !equal(v, c.Value)
	case "lt", "lte", "gt", "gte":
		// Ordering compares like kinds only: "10" is not greater than 9.
		if !present || rank(v) != rank(c.Value) {
			return false
		}
		k := compare(v, c.Value)
		switch c.Op {
		case "lt":
			return k < 0
		case "lte":
			return k <= 0
		case "gt":
			return k > 0
		}
		return k >= 0
	case "in", "not_in":
		found := false
		for _, e := range c.Value.([]any) {
			if present && equal(v, e) {
				found = true
				break
			}
		}
		return found == (c.Op == "in")
	case "contains":
		switch x := v.(type) {
		case string:
			s, ok := c.Value.(string)
			return ok && strings.Contains(x, s)
		case []any:
			return slices.ContainsFunc(x, func(e any) bool { return equal(e, c.Value) })
		}
		return false
	case "starts_with":
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, c.Value.(string))
	case "ends_with":
		s, ok := v.(string)
		return ok && strings.HasSuffix(s, c.Value.(string))
	case "matches":
		s, ok := v.(string)
		return ok && c.re.MatchString(s)
	}
	return false
}

// tableSelect keeps the fields listed (a missing one as null), renamed
// by rename.
func tableSelect(raw json.RawMessage, in any) (any, error) {
	var a struct {
		Step   string            `json:"step"`
		From   *int              `json:"from"`
		Fields []string          `json:"fields"`
		Rename map[string]string `json:"rename"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if len(a.Fields) == 0 {
		return nil, errorf(CodeBadArgs, "give fields: [names]")
	}
	for k := range a.Rename {
		if !slices.Contains(a.Fields, k) {
			return nil, errorf(CodeBadArgs, "rename names %q, which is not among fields", k)
		}
	}
	rs, err := rows(in, "table_select")
	if err != nil {
		return nil, err
	}
	out := make([]any, len(rs))
	for i, r := range rs {
		m := make(map[string]any, len(a.Fields))
		for _, f := range a.Fields {
			v, _ := field(r, f)
			name := f
			if n, ok := a.Rename[f]; ok {
				name = n
			}
			m[name] = v
		}
		out[i] = m
	}
	return out, nil
}

// topK keeps the first k rows, after sorting by by (descending unless
// order says otherwise) when by is given. It works on any array.
func topK(raw json.RawMessage, in any) (any, error) {
	var a struct {
		Step  string `json:"step"`
		From  *int   `json:"from"`
		K     *int   `json:"k"`
		By    string `json:"by"`
		Order string `json:"order"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if a.K == nil || *a.K < 0 {
		return nil, errorf(CodeBadArgs, "give k, a number of rows (0 or more)")
	}
	arr, ok := in.([]any)
	if !ok {
		return nil, errorf(CodeBadArgs, "top_k needs an array; its input is %s", kindOf(in))
	}
	if a.By != "" {
		if a.Order == "" {
			a.Order = "desc"
		}
		k := sortKey{a.By, a.Order}
		if err := k.check("top_k"); err != nil {
			return nil, err
		}
		rs, err := rows(in, "top_k with by")
		if err != nil {
			return nil, err
		}
		rs = slices.Clone(rs)
		sortRows(rs, []sortKey{k})
		arr = fromRows(rs)
	}
	return slices.Clone(arr[:min(*a.K, len(arr))]), nil
}

type aggregate struct {
	Op    string `json:"op"`
	Field string `json:"field"`
	As    string `json:"as"`
}

var aggOps = []string{"count", "sum", "avg", "min", "max", "first", "last", "count_distinct", "collect"}

// groupBy groups rows by the values of by and computes aggregates per
// group; groups come out in the order of their first row.
func groupBy(raw json.RawMessage, in any) (any, error) {
	var a struct {
		Step       string      `json:"step"`
		From       *int        `json:"from"`
		By         any         `json:"by"`
		Aggregates []aggregate `json:"aggregates"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	by, err := stringList(a.By, "by")
	if err != nil {
		return nil, err
	}
	if len(a.Aggregates) == 0 {
		a.Aggregates = []aggregate{{Op: "count"}}
	}
	for i := range a.Aggregates {
		g := &a.Aggregates[i]
		if !slices.Contains(aggOps, g.Op) {
			return nil, errorf(CodeBadArgs, "aggregates[%d]: op %q: use one of %s", i, g.Op, strings.Join(aggOps, ", "))
		}
		if g.Op != "count" && g.Field == "" {
			return nil, errorf(CodeBadArgs, "aggregates[%d]: %s needs a field", i, g.Op)
		}
		if g.As == "" {
			g.As = g.Op
			if g.Field != "" {
				g.As = g.Op + "_" + g.Field
			}
		}
		if slices.Contains(by, g.As) {
			return nil, errorf(CodeBadArgs, "aggregates[%d]: its name %q is a group field; set as", i, g.As)
		}
	}
	rs, err := rows(in, "groupby")
	if err != nil {
		return nil, err
	}
	type group struct {
		key  []any
		rows []map[string]any
	}
	var order []*group
	groups := map[string]*group{}
	for _, r := range rs {
		key := make([]any, len(by))
		for i, f := range by {
			key[i], _ = field(r, f)
		}
		kb, _ := json.Marshal(key)
		g := groups[string(kb)]
		if g == nil {
			g = &group{key: key}
			groups[string(kb)] = g
			order = append(order, g)
		}
		g.rows = append(g.rows, r)
	}
	out := make([]any, 0, len(order))
	for _, g := range order {
		m := map[string]any{}
		for i, f := range by {
			m[f] = g.key[i]
		}
		for _, ag := range a.Aggregates {
			v, err := ag.apply(g.rows)
			if err != nil {
				return nil, err
			}
			m[ag.As] = v
		}
		out = append(out, m)
	}
	return out, nil
}

func (ag aggregate) apply(rs []map[string]any) (any, error) {
	if ag.Op == "count" {
		if ag.Field == "" {
			return len(rs), nil
		}
		n := 0
		for _, r := range rs {
			if v, ok := field(r, ag.Field); ok && v != nil {
				n++
			}
		}
		return n, nil
	}
	var vals []any
	for _, r := range rs {
		if v, ok := field(r, ag.Field); ok && v != nil {
			vals = append(vals, v)
		}
	}
	switch ag.Op {
	case "first":
		if len(vals) == 0 {
			return nil, nil
		}
		return vals[0], nil
	case "last":
		if len(vals) == 0 {
			return nil, nil
		}
		return vals[len(vals)-1], nil
	case "collect":
		return append([]any{}, vals...), nil
	case "count_distinct":
		seen := map[string]bool{}
		for _, v := range vals {
			b, _ := json.Marshal(v)
			seen[string(b)] = true
		}
		return len(seen), nil
	case "min", "max":
		if len(vals) == 0 {
			return nil, nil
		}
		best := vals[0]
		for _, v := range vals[1:] {
			c := compare(v, best)
			if ag.Op == "min" && c < 0 || ag.Op == "max" && c > 0 {
				best = v
			}
		}
		return best, nil
	}
	// sum, avg: numbers only; an int sum stays an int unless it overflows.
	isum, allInt, fsum := 0, true, 0.0
	for _, v := range vals {
		f, ok := num(v)
		if !ok {
			return nil, errorf(CodeBadArgs, "groupby %s of %s: %s is not a number (filter or convert it first)", ag.Op, ag.Field, clip(jsonText(v), 80))
		}
		fsum += f
		if i, ok := v.(int); ok && allInt {
			if (i > 0 && isum > math.MaxInt-i) || (i < 0 && isum < math.MinInt-i) {
				allInt = false
			} else {
				isum += i
			}
		} else {
			allInt = false
		}
	}
	if ag.Op == "sum" {
		if allInt {
			return isum, nil
		}
		return fsum, nil
	}
	if len(vals) == 0 {
		return nil, nil
	}
	return fsum / float64(len(vals)), nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// stringList reads a parameter that is a string or an array of strings.
func stringList(v any, name string) ([]string, error) {
	switch x := v.(type) {
	case string:
		if x != "" {
			return []string{x}, nil
		}
	case []any:
		var out []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok || s == "" {
				return nil, errorf(CodeBadArgs, "%s must be a field name or an array of field names", name)
			}
			out = append(out, s)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, errorf(CodeBadArgs, "give %s: a field name or an array of field names", name)
}

// join joins the input (left) with right on equal key values: inner
// keeps matched rows, left keeps every left row. A right field whose name
// the left row has already is prefixed (right_prefix, "right_").
func (p *pipeline) join(ctx context.Context, raw json.RawMessage, in any, results []any) (any, error) {
	var a struct {
		Step        string          `json:"step"`
		From        *int            `json:"from"`
		Right       json.RawMessage `json:"right"`
		On          any             `json:"on"`
		LeftOn      any             `json:"left_on"`
		RightOn     any             `json:"right_on"`
		Type        string          `json:"type"`
		RightPrefix *string         `json:"right_prefix"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if len(a.Right) == 0 {
		return nil, errorf(CodeBadArgs, "give right: the other table (an array, {\"$ref\": ...} or {\"$step\": N})")
	}
	if a.Type == "" {
		a.Type = "inner"
	}
	if a.Type != "inner" && a.Type != "left" {
		return nil, errorf(CodeBadArgs, "type %q: use \"inner\" or \"left\"", a.Type)
	}
	var lk, rk []string
	var err error
	if a.On != nil {
		if lk, err = stringList(a.On, "on"); err != nil {
			return nil, err
		}
		rk = lk
	} else {
		if lk, err = stringList(a.LeftOn, "left_on (or on)"); err != nil {
			return nil, err
		}
		if rk, err = stringList(a.RightOn, "right_on"); err != nil {
			return nil, err
		}
	}
	if len(lk) != len(rk) {
		return nil, errorf(CodeBadArgs, "left_on has %d fields and right_on %d", len(lk), len(rk))
	}
	prefix := "right_"
	if a.RightPrefix != nil {
		prefix = *a.RightPrefix
	}
	rv, err := p.resolve(ctx, a.Right, results, "right")
	if err != nil {
		return nil, err
	}
	left, err := rows(in, "join (its input, the left table)")
	if err != nil {
		return nil, err
	}
	right, err := rows(rv, "join (right)")
	if err != nil {
		return nil, err
	}
	keyOf := func(r map[string]any, ks []string) (string, bool) {
		key := make([]any, len(ks))
		for i, f := range ks {
			v, ok := field(r, f)
			if !ok || v == nil {
				return "", false // null keys never match, as in SQL
			}
			if f, ok := num(v); ok {
				v = f // 1 joins 1.0
			}
			key[i] = v
		}
		b, _ := json.Marshal(key)
		return string(b), true
	}
	index := map[string][]map[string]any{}
	for _, r := range right {
		if k, ok := keyOf(r, rk); ok {
			index[k] = append(index[k], r)
		}
	}
	maxRows := p.w.limits.MaxRows
	out := []any{}
	for _, l := range left {
		k, ok := keyOf(l, lk)
		matches := index[k]
		if !ok {
			matches = nil
		}
		if len(matches) == 0 && a.Type == "left" {
			out = append(out, l)
		}
		for _, r := range matches {
			m := make(map[string]any, len(l)+len(r))
			for f, v := range l {
				m[f] = v
			}
			for f, v := range r {
				if slices.Contains(rk, f) && slices.Contains(lk, f) {
					continue // the same key field: already there
				}
				if _, dup := m[f]; dup {
					f = prefix + f
				}
				m[f] = v
			}
			out = append(out, m)
		}
		if len(out) > maxRows {
			return nil, errorf(CodeTooLarge, "the join makes more than %d rows; filter or group the tables first, or join on more keys", maxRows)
		}
	}
	return out, nil
}

// jqTransform runs a jq program (gojq) on the input, within JQTimeout,
// collecting at most MaxJQOutputs values. The program cannot read the
// worker's environment ($ENV, env are empty) nor any file or input
// beyond its one input value.
func jqTransform(ctx context.Context, raw json.RawMessage, in any, lim Limits) (any, error) {
	var a struct {
		Step    string `json:"step"`
		From    *int   `json:"from"`
		Program string `json:"program"`
		All     bool   `json:"all"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if strings.TrimSpace(a.Program) == "" {
		return nil, errorf(CodeBadArgs, "give program: a jq program, e.g. \".items | map(.price)\"")
	}
	if len(a.Program) > 4096 {
		return nil, errorf(CodeBadArgs, "the program is %d bytes; at most 4096 are allowed", len(a.Program))
	}
	q, err := gojq.Parse(a.Program)
	if err != nil {
		return nil, errorf(CodeBadArgs, "the jq program does not parse: %v", err)
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, errorf(CodeBadArgs, "the jq program does not compile: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, lim.JQTimeout)
	defer cancel()
	iter := code.RunWithContext(ctx, in)
	var outs []any
	size := 0
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := v.(error); ok {
			var he *gojq.HaltError
			if errors.As(err, &he) && he.Value() == nil {
				break
			}
			if ctx.Err() != nil {
				return nil, errorf(CodeTimeout, "the jq program did not finish within %s", lim.JQTimeout)
			}
			return nil, errorf(CodeFailed, "jq: %v", err)
		}
		if len(outs) >= lim.MaxJQOutputs {
			return nil, errorf(CodeTooLarge, "the jq program emitted more than %d values", lim.MaxJQOutputs)
		}
		// Bound what the program makes as it goes, not only at the end.
		b, err := marshalBounded(v, lim.MaxBlobBytes-size)
		if err != nil {
			if e := asToolError(err); e.Code != CodeTooLarge {
				return nil, errorf(e.Code, "the jq program's output: %s", e.Message)
			}
			return nil, errorf(CodeTooLarge, "the jq program's output is more than %d bytes", lim.MaxBlobBytes)
		}
		size += len(b)
		v, err = decodeJSON(b, lim.MaxDepth) // gojq's numbers (big ints) back to ours; depth bounded
		if err != nil {
			return nil, errorf(CodeTooLarge, "the jq program's output: %v", err)
		}
		outs = append(outs, v)
	}
	if a.All {
		if outs == nil {
			outs = []any{}
		}
		return outs, nil
	}
	if len(outs) != 1 {
		return nil, errorf(CodeFailed, "the jq program emitted %d values; one is expected (wrap it in [...] to collect them, or set all: true)", len(outs))
	}
	return outs[0], nil
}

// compileRegex compiles a Go (RE2) regular expression of bounded length;
// RE2 runs in linear time, so no pattern backtracks catastrophically.
func compileRegex(pattern string, lim Limits) (*regexp.Regexp, error) {
	if len(pattern) > lim.MaxRegexLen {
		return nil, errorf(CodeBadArgs, "the pattern is %d bytes; at most %d are allowed", len(pattern), lim.MaxRegexLen)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, errorf(CodeBadArgs, "the pattern is not a Go (RE2) regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// regexExtract applies a pattern to the input string, or to field of every
// row (writing into). A match is the matched text without groups, an
// object with named groups, else the array of the groups; all collects
// every match.
func regexExtract(raw json.RawMessage, in any, lim Limits) (any, error) {
	var a struct {
		Step    string `json:"step"`
		From    *int   `json:"from"`
		Pattern string `json:"pattern"`
		Field   string `json:"field"`
		Into    string `json:"into"`
		All     bool   `json:"all"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	if a.Pattern == "" {
		return nil, errorf(CodeBadArgs, "give pattern: a Go (RE2) regular expression")
	}
	re, err := compileRegex(a.Pattern, lim)
	if err != nil {
		return nil, err
	}
	budget := lim.MaxMatches
	extract := func(s string) (any, error) {
		n := 1
		if a.All {
			n = budget + 1
		}
		ms := re.FindAllStringSubmatch(s, n)
		if len(ms) > budget {
			return nil, errorf(CodeTooLarge, "more than %d matches", lim.MaxMatches)
		}
		budget -= len(ms)
		vals := make([]any, len(ms))
		for i, m := range ms {
			vals[i] = matchValue(re, m)
		}
		if a.All {
			return vals, nil
		}
		if len(vals) == 0 {
			return nil, nil
		}
		return vals[0], nil
	}
	if a.Field == "" {
		s, ok := in.(string)
		if !ok {
			return nil, errorf(CodeBadArgs, "without field, regex_extract reads a string; its input is %s (give field to read a column of a table)", kindOf(in))
		}
		return extract(s)
	}
	rs, err := rows(in, "regex_extract with field")
	if err != nil {
		return nil, err
	}
	into := a.Into
	if into == "" {
		into = a.Field + "_match"
	}
	out := make([]any, len(rs))
	for i, r := range rs {
		m := maps(r)
		v, _ := field(r, a.Field)
		if s, ok := v.(string); ok {
			if m[into], err = extract(s); err != nil {
				return nil, err
			}
		} else {
			m[into] = nil
		}
		out[i] = m
	}
	return out, nil
}

// maps copies a row so that a step never changes its input (an earlier
// step's result another step may read with from).
func maps(r map[string]any) map[string]any {
	m := make(map[string]any, len(r)+1)
	for k, v := range r {
		m[k] = v
	}
	return m
}

func matchValue(re *regexp.Regexp, m []string) any {
	if re.NumSubexp() == 0 {
		return m[0]
	}
	names := re.SubexpNames()
	named := true
	for _, n := range names[1:] {
		if n == "" {
			named = false
		}
	}
	if named {
		o := map[string]any{}
		for i, n := range names[1:] {
			o[n] = m[i+1]
		}
		return o
	}
	arr := make([]any, len(m)-1)
	for i := range arr {
		arr[i] = m[i+1]
	}
	return arr
}

// dateFormats are the names parse_date knows besides Go layouts.
var dateFormats = map[string]string{
	"rfc3339": time.RFC3339, "rfc3339nano": time.RFC3339Nano, "rfc1123": time.RFC1123, "rfc1123z": time.RFC1123Z,
	"rfc822": time.RFC822, "rfc822z": time.RFC822Z, "rfc850": time.RFC850, "ansic": time.ANSIC,
	"date": "2006-01-02", "datetime": "2006-01-02 15:04:05", "iso_local": "2006-01-02T15:04:05",
}

var defaultDateFormats = []string{"rfc3339nano", "iso_local", "datetime", "date", "rfc1123z", "rfc1123", "unix"}

// parseDate parses dates written in one of formats (names, Go layouts,
// "unix" seconds or "unix_ms"), reading a zone-less date in timezone, and
// writes them in output (rfc3339 by default, "unix", "unix_ms" or a
// layout) in output_timezone.
func parseDate(raw json.RawMessage, in any) (any, error) {
	var a struct {
		Step           string   `json:"step"`
		From           *int     `json:"from"`
		Field          string   `json:"field"`
		Into           string   `json:"into"`
		Formats        []string `json:"formats"`
		Timezone       string   `json:"timezone"`
		Output         string   `json:"output"`
		OutputTimezone string   `json:"output_timezone"`
		OnError        string   `json:"on_error"`
	}
	if err := strictDecode(raw, &a); err != nil {
		return nil, errorf(CodeBadArgs, "%v", err)
	}
	loadTZ := func(name, what string) (*time.Location, error) {
		if name == "" {
			return time.UTC, nil
		}
		// IANA names only: a path would make LoadLocation read files.
		if strings.Contains(name, "..") || strings.HasPrefix(name, "/") || len(name) > 64 {
			return nil, errorf(CodeBadArgs, "%s %q is not an IANA time zone name", what, name)
		}
		l, err := time.LoadLocation(name)
		if err != nil {
			return nil, errorf(CodeBadArgs, "%s %q is not an IANA time zone name (e.g. \"Europe/Paris\", \"UTC\")", what, name)
		}
		return l, nil
	}
	inTZ, err := loadTZ(a.Timezone, "timezone")
	if err != nil {
		return nil, err
	}
	outTZ := inTZ
	if a.OutputTimezone != "" {
		if outTZ, err = loadTZ(a.OutputTimezone, "output_timezone"); err != nil {
			return nil, err
		}
	}
	formats := a.Formats
	if len(formats) == 0 {
		formats = defaultDateFormats
	}
	for _, f := range formats {
		if !knownFormat(f) {
			return nil, errorf(CodeBadArgs, "format %q is neither a known name (rfc3339, rfc1123, date, datetime, iso_local, unix, unix_ms, ...) nor a Go layout (written with the reference time 2006-01-02 15:04:05)", f)
		}
	}
	if a.OnError == "" {
		a.OnError = "fail"
	}
	if a.OnError != "fail" && a.OnError != "null" {
		return nil, errorf(CodeBadArgs, "on_error %q: use \"fail\" or \"null\"", a.OnError)
	}
	out := a.Output
	if out == "" {
		out = "rfc3339"
	}
	if !knownFormat(out) {
		return nil, errorf(CodeBadArgs, "output %q is neither a format name nor a Go layout", out)
	}
	conv := func(v any) (any, error) {
		t, err := parseOne(v, formats, inTZ)
		if err != nil {
			if a.OnError == "null" {
				return nil, nil
			}
			return nil, err
		}
		t = t.In(outTZ)
		switch out {
		case "unix":
			return t.Unix(), nil
		case "unix_ms":
			return t.UnixMilli(), nil
		}
		if l, ok := dateFormats[strings.ToLower(out)]; ok {
			return t.Format(l), nil
		}
		return t.Format(out), nil
	}
	if a.Field == "" {
		if _, ok := in.([]any); ok {
			return nil, errorf(CodeBadArgs, "the input is a table: give field, the column to parse")
		}
		return conv(in)
	}
	rs, err := rows(in, "parse_date with field")
	if err != nil {
		return nil, err
	}
	into := a.Into
	if into == "" {
		into = a.Field
	}
	res := make([]any, len(rs))
	for i, r := range rs {
		m := maps(r)
		v, _ := field(r, a.Field)
		if m[into], err = conv(v); err != nil {
			return nil, errorf(CodeFailed, "row %d: %s", i, asToolError(err).Message)
		}
		res[i] = m
	}
	return res, nil
}

// knownFormat reports whether f is a format name or a Go layout (one
// with at least one element of the reference time).
func knownFormat(f string) bool {
	if _, ok := dateFormats[strings.ToLower(f)]; ok || f == "unix" || f == "unix_ms" {
		return true
	}
	return time.Date(1999, 12, 31, 23, 59, 58, 0, time.UTC).Format(f) != f
}

func parseOne(v any, formats []string, tz *time.Location) (time.Time, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = strings.TrimSpace(x)
	case int, float64:
		f, _ := num(x)
		for _, fm := range formats {
			if fm == "unix" || fm == "unix_ms" {
				return fromUnix(f, fm)
			}
		}
		return time.Time{}, errorf(CodeFailed, "%v is a number; add \"unix\" or \"unix_ms\" to formats to read it", x)
	default:
		return time.Time{}, errorf(CodeFailed, "%s is not a date", clip(jsonText(v), 80))
	}
	for _, fm := range formats {
		switch fm {
		case "unix", "unix_ms":
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				return fromUnix(f, fm)
			}
			continue
		}
		layout := fm
		if l, ok := dateFormats[strings.ToLower(fm)]; ok {
			layout = l
		}
		if t, err := time.ParseInLocation(layout, s, tz); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errorf(CodeFailed, "%q matches none of the formats %s", clip(s, 80), strings.Join(formats, ", "))
}

func fromUnix(f float64, fm string) (time.Time, error) {
	if fm == "unix_ms" {
		f /= 1000
	}
	if math.IsNaN(f) || math.Abs(f) > 1e11 { // about year 5000
		return time.Time{}, errorf(CodeFailed, "%v is out of range for a %s time", f, fm)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
}
