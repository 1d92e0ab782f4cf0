package ir

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a JSON Schema (draft 2020-12) of the IR document, for tools
// outside Go. It describes the shape only: Validate checks much more.
//
//go:embed schema.json
var Schema []byte

const schemaURL = "https://wfc-lang.github.io/schema/ir-v1.json"

// noLoader refuses every reference the schema does not resolve by itself,
// so that validating a document never reads a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refusing to load %s", url)
}

var compiledSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
})

// ValidateSchema checks a JSON IR document against Schema. It is meant for
// tests, such as the compiler's golden tests, that want to know that what
// they wrote is what the schema promises.
func ValidateSchema(data []byte) error {
	if len(data) > MaxSize {
		return errors.New("ir: document over the size limit")
	}
	if err := scanShape(data, nil); err != nil { // depth and syntax, with positions
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("ir: %w", err)
	}
	sch, err := compiledSchema()
	if err != nil {
		return fmt.Errorf("ir: compiling the schema: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("ir: %w", err)
	}
	return nil
}
