// Package heapfloor keeps Go's garbage collector from collecting a small
// heap over and over: a wfc worker's live heap is a few megabytes, and at
// Go's default target (collect when the heap doubles) it collects many
// times a second under load, about a fifth of its CPU (docs/performance.md,
// "Issue #19, seventh pass"). Start raises the collector's target while
// the live heap is small, so that the heap may grow to a floor before a
// collection, and gives the default back as the live heap nears the floor:
// above it, memory is what it would be without the package.
//
// A process sets its garbage collection policy once, so a library does not
// call Start on its own: `wfc worker`, `wfc run`, `wfc serve` and `wfc
// bench` do, unless GOGC is set in their environment.
package heapfloor
