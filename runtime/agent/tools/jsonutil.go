package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// decodeJSON decodes one JSON value whose nesting is at most maxDepth into
// the values every step works on: nil, bool, int (an integer that fits),
// float64, string, []any and map[string]any. The depth is checked on the
// token stream first, so a hostile document costs no deep recursion.
func decodeJSON(data []byte, maxDepth int) (any, error) {
	if err := checkDepth(data, maxDepth); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	var bad error
	v = normalize(v, &bad)
	return v, bad
}

func checkDepth(data []byte, maxDepth int) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	depth := 0
	for {
		t, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if dl, ok := t.(json.Delim); ok {
			switch dl {
			case '[', '{':
				depth++
				if depth > maxDepth {
					return fmt.Errorf("nested deeper than %d levels", maxDepth)
				}
			default:
				depth--
			}
		}
	}
}

// normalize turns json.Number into int or float64, in place; a number
// out of float64's range sets *bad.
func normalize(v any, bad *error) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil && i >= math.MinInt && i <= math.MaxInt {
			return int(i)
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && *bad == nil {
			*bad = fmt.Errorf("the number %s is out of range", clip(string(x), 40))
		}
		return f
	case []any:
		for i := range x {
			x[i] = normalize(x[i], bad)
		}
	case map[string]any:
		for k := range x {
			x[k] = normalize(x[k], bad)
		}
	}
	return v
}

// errTooLarge is what limitWriter reports once its bound is passed.
var errTooLarge = errors.New("too large")

type limitWriter struct {
	buf bytes.Buffer
	max int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, errTooLarge
	}
	return w.buf.Write(p)
}

// marshalBounded encodes v as JSON and stops, with a too_large error, as
// soon as the encoding passes max bytes (so a huge value is never held
// twice in memory). Non-finite numbers, which JSON cannot carry, are an
// error too.
func marshalBounded(v any, max int) (json.RawMessage, error) {
	w := &limitWriter{max: max + 1}
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, errorf(CodeTooLarge, "the value is more than %d bytes of JSON; narrow it (table_select, top_k, jq_transform)", max)
		}
		return nil, errorf(CodeFailed, "the value cannot be written as JSON: %v", err)
	}
	return bytes.TrimRight(w.buf.Bytes(), "\n"), nil
}

// compileSchema compiles a tool's parameter schema.
func compileSchema(name string, schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// schemaMessage is a validation error in a few lines the model can read:
// the leaves of the error tree, each with the place in the arguments.
func schemaMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var lines []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			at := "/" + strings.Join(e.InstanceLocation, "/")
			lines = append(lines, fmt.Sprintf("at %s: %s", at, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(lines) > 5 {
		lines = append(lines[:5], fmt.Sprintf("(and %d more)", len(lines)-5))
	}
	return strings.Join(lines, "; ")
}
