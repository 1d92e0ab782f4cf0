package lsp

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	protocol "github.com/tliron/glsp/protocol_3_16"

	"github.com/wfc-lang/wfc/compiler"
	"github.com/wfc-lang/wfc/lang/source"
)

// A document is an open text document: its latest snapshot, and the state
// of its diagnostics.
type document struct {
	uri string

	mu       sync.Mutex
	snap     *snapshot // the latest version
	compiled *snapshot // the latest snapshot whose compilation finished
	closed   bool
	timer    *time.Timer

	pubMu     sync.Mutex // held while deciding to publish and publishing
	published uint64     // seq of the last snapshot whose diagnostics were sent
}

func (d *document) latest() *snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snap
}

// infoSnapshot returns the snapshot whose compiler.Info completion should
// use without waiting: the latest one if it is compiled, else the latest
// compiled one (its names and types are at most one edit old), else the
// latest after compiling it.
func (d *document) infoSnapshot() *snapshot {
	d.mu.Lock()
	snap, old := d.snap, d.compiled
	d.mu.Unlock()
	if snap.compiled() || old == nil {
		return snap
	}
	return old
}

func (d *document) noteCompiled(s *snapshot) {
	d.mu.Lock()
	if d.compiled == nil || d.compiled.seq < s.seq {
		d.compiled = s
	}
	d.mu.Unlock()
}

// A store holds the open documents by URI.
type store struct {
	mu   sync.Mutex
	docs map[string]*document
	seq  uint64
}

func newStore() *store { return &store{docs: map[string]*document{}} }

func (st *store) get(uri string) *document {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.docs[uri]
}

func (st *store) nextSeq() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	return st.seq
}

// readFile is the compiler's ReadFile: an import or child flow that is open
// in the editor is read from its latest text, anything else from disk.
func (s *server) readFile(path string) ([]byte, error) {
	s.docs.mu.Lock()
	docs := make([]*document, 0, len(s.docs.docs))
	for _, d := range s.docs.docs {
		docs = append(docs, d)
	}
	s.docs.mu.Unlock()
	for _, d := range docs {
		if snap := d.latest(); snap != nil && snap.name == path {
			return snap.src(), nil
		}
	}
	if s.opts.ReadFile != nil {
		return s.opts.ReadFile(path)
	}
	// The compiler's own reader: a named pipe or a device (an import of
	// /dev/zero) is refused, not read until the server hangs or runs out
	// of memory, and so is a file over the size limit.
	return compiler.ReadFile(path)
}

func (s *server) compilerConfig() compiler.Config {
	// The same configuration as `wfc check`, so the diagnostics are the same.
	return compiler.Config{NoOptimize: true, ReadFile: s.readFile}
}

func (s *server) didOpen(uri string, version int32, text string) {
	snap := newSnapshot(uri, version, s.docs.nextSeq(), []byte(text), s.compilerConfig(), s.log)
	s.docs.mu.Lock()
	d := s.docs.docs[uri]
	if d == nil {
		d = &document{uri: uri}
		s.docs.docs[uri] = d
	}
	s.docs.mu.Unlock()
	d.mu.Lock()
	d.snap, d.closed = snap, false
	d.mu.Unlock()
	s.schedule(d, 0)
	// Its importers now compile against the editor's text, not the disk's.
	s.recheckDependants(uri)
}

func (s *server) didChange(uri string, version int32, changes []any) error {
	d := s.docs.get(uri)
	if d == nil {
		return fmt.Errorf("didChange for a document that is not open: %s", uri)
	}
	d.mu.Lock()
	old := d.snap
	d.mu.Unlock()
	text, err := applyChanges(old, changes)
	if err != nil {
		return err
	}
	if version <= old.version {
		s.log.Warn("document version did not increase", "uri", uri, "old", old.version, "new", version)
	}
	snap := newSnapshot(uri, version, s.docs.nextSeq(), text, s.compilerConfig(), s.log)
	d.mu.Lock()
	d.snap = snap
	d.mu.Unlock()
	s.schedule(d, s.opts.Debounce)
	s.recheckDependants(uri)
	return nil
}

func (s *server) didClose(uri string) {
	s.docs.mu.Lock()
	d := s.docs.docs[uri]
	delete(s.docs.docs, uri)
	s.docs.mu.Unlock()
	if d == nil {
		return
	}
	d.mu.Lock()
	d.closed = true
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
	// Clear the document's diagnostics in the editor.
	d.pubMu.Lock()
	s.notify(string(protocol.ServerTextDocumentPublishDiagnostics), protocol.PublishDiagnosticsParams{URI: uri, Diagnostics: []protocol.Diagnostic{}})
	d.pubMu.Unlock()
	// Its importers now compile against the file on disk.
	s.recheckDependants(uri)
}

// applyChanges applies the content changes of one didChange, in order, to
// the text of snap.
func applyChanges(snap *snapshot, changes []any) ([]byte, error) {
	text := snap.src()
	m := snap.m
	fresh := true // m maps text
	for _, c := range changes {
		switch c := c.(type) {
		case protocol.TextDocumentContentChangeEventWhole:
			text = []byte(c.Text)
			fresh = false
		case protocol.TextDocumentContentChangeEvent:
			if c.Range == nil {
				text = []byte(c.Text)
				fresh = false
				continue
			}
			if !fresh {
				m = NewMapper(source.NewFile("", text))
			}
			r := m.ByteRange(*c.Range)
			out := make([]byte, 0, len(text)-r.Len()+len(c.Text))
			out = append(out, text[:r.Start]...)
			out = append(out, c.Text...)
			out = append(out, text[r.End:]...)
			text = out
			fresh = false
		default:
			return nil, fmt.Errorf("unknown content change %T", c)
		}
	}
	return text, nil
}

// schedule publishes the diagnostics of d's latest snapshot after delay,
// unless another change comes first (debouncing).
func (s *server) schedule(d *document, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	if s.stopping() {
		return
	}
	d.timer = time.AfterFunc(delay, func() { s.publish(d) })
}

// publish compiles d's latest snapshot and sends its diagnostics, unless a
// newer snapshot exists by then or newer diagnostics were already sent:
// diagnostics of an older version never follow those of a newer one.
func (s *server) publish(d *document) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic while publishing diagnostics", "uri", d.uri, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	snap := d.latest()
	if snap == nil || s.stopping() {
		return
	}
	// At most compileSlots compilations at once: a change to a file that
	// many open documents import re-checks them all, and as many
	// compilations in parallel would leave requests no CPU to run on.
	s.compileSlots <- struct{}{}
	if d.latest() != snap && !snap.compiled() {
		<-s.compileSlots
		return // superseded while waiting: the newer snapshot's timer publishes
	}
	start := time.Now()
	res := snap.result()
	<-s.compileSlots
	d.noteCompiled(snap)
	diags := toProtocolDiagnostics(snap, res)

	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	d.mu.Lock()
	stale := d.closed || d.snap.seq != snap.seq || snap.seq <= d.published
	if !stale {
		d.published = snap.seq
	}
	d.mu.Unlock()
	if stale {
		s.log.Debug("dropped stale diagnostics", "uri", d.uri, "version", snap.version)
		return
	}
	version := uint32(max(snap.version, 0))
	s.notify(string(protocol.ServerTextDocumentPublishDiagnostics), protocol.PublishDiagnosticsParams{URI: d.uri, Version: &version, Diagnostics: diags})
	s.log.Debug("published diagnostics", "uri", d.uri, "version", snap.version, "count", len(diags), "elapsed", time.Since(start))
	if s.opts.onPublish != nil {
		s.opts.onPublish(d.uri, snap.version)
	}
}
