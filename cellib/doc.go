// Package cellib is the CEL library of the wf language: cel-go's standard
// definitions plus the strings and math extensions and wfc's own functions
// (url.pathEscape, url.queryEscape). The compiler type-checks with it, the
// runtime evaluates with it and the language server completes from it, so
// that the three agree on which functions exist. It is a leaf: it imports
// only the standard library and cel-go.
package cellib
