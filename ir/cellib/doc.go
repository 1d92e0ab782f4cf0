// Package cellib is the CEL library of the wf language: cel-go's standard
// definitions plus the strings and math extensions and wfc's own functions
// (url.pathEscape, url.queryEscape). The compiler type-checks with it, the
// runtime evaluates with it and the language server completes from it, so
// that the three agree on which functions exist. It is a leaf: it imports
// only the standard library and cel-go, and lives under ir because the
// expressions it types are part of the IR (runtime may import only ir).
package cellib
