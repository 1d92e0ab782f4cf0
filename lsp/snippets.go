package lsp

import (
	"regexp"
	"strings"

	protocol "github.com/tliron/glsp/protocol_3_16"
)

// Snippets: completion offers, next to a keyword that opens a declaration
// or a block, an item of kind Snippet that writes the whole thing with
// tab stops (`task ${1:name} {…}`). They ride on the keyword tables of
// words.go: a snippet is offered exactly where its keyword is (a node kind
// in a workflow body, `retry` in the body of a node kind that accepts it
// and does not have one yet, `import` at the top level), so legality is
// decided once. A keyword of the tables without an entry here whose form
// opens a block (`key { … }`) gets a plain block snippet, so an item added
// to the tables later has one too.
//
// Clients without snippetSupport get the same text with each placeholder's
// default (a choice's first option) as plain text. Lines after the first
// are indented like the line of the cursor, and the item says
// insertTextMode asIs, so the client does not indent them again.

// snippets maps "block:keyword" (the frame head completion is in: top,
// workflow, node, handler, retry, …) to the snippet of that keyword there.
// The placeholders' defaults are chosen so that the plain-text version
// parses (snippets_test.go) and, where it can, compiles.
var snippets = map[string]string{
	"top:workflow": "workflow ${1:name} {\n  task ${2:start} {\n    run \"${3:noop}\"\n  }$0\n}",
	"top:import":   "import \"${1:lib.wf}\"$0",
	"top:handler":  "handler \"${1:name}\" {\n  description \"${2:what it does}\"\n  config {\n    ${3:field}: ${4:string}\n  }\n  output {\n    ${5:result}: ${6:string}\n  }\n}$0",

	"workflow:task":    "task ${1:name} {\n  run \"${2:noop}\"$0\n}",
	"workflow:agent":   "agent ${1:name} {\n  model \"${2:gpt-4o}\"\n  prompt \"${3:What should happen next?}\"$0\n}",
	"workflow:human":   "human ${1:name} {\n  approvers [\"${2:approver@example.com}\"]\n  prompt \"${3:Approve?}\"\n  timeout ${4:24h}$0\n}",
	"workflow:flow":    "flow ${1:name} {\n  uses \"${2:child.wf}\"$0\n}",
	"workflow:input":   "input {\n  ${1:name}: ${2:string}$0\n}",
	"workflow:output":  "output {\n  ${1:name} = ${2:\"\"}$0\n}",
	"workflow:finally": "finally {\n  run \"${1:noop}\"$0\n}",
	"workflow:handler": "handler \"${1:name}\" {\n  config {\n    ${2:field}: ${3:string}\n  }\n  output {\n    ${4:result}: ${5:string}\n  }\n}$0",

	"node:with":       "with {\n  ${1:field} = ${2:\"\"}$0\n}",
	"node:retry":      "retry {\n  attempts ${1:3}\n  backoff ${2|exponential,fixed,linear|}\n  delay ${3:1s}\n}$0",
	"node:for_each":   "for_each ${1:item} in ${2:input.items}$0",
	"node:branch":     "branch {\n  when ${1:output.ok} => ${2:target}\n  else => ${3:other}\n}$0",
	"node:loop":       "loop {\n  while ${1:output.again}\n  max ${2:10}\n}$0",
	"node:compensate": "compensate {\n  run \"${1:noop}\"$0\n}",
	"node:output":     "output {\n  ${1:field}: ${2:string}$0\n}",
	"node:on_error":   "on_error => ${1:target}$0",

	"handler:config": "config {\n  ${1:field}: ${2:string}$0\n}",
	"handler:output": "output {\n  ${1:field}: ${2:string}$0\n}",
}

// blockForm matches the form of a keyword that opens a block: `key { … }`.
var blockForm = regexp.MustCompile(`^([a-z_]+) \{`)

// snippetFor returns the snippet of keyword w in block head, or "".
func snippetFor(head string, w word) string {
	if s, ok := snippets[head+":"+w.name]; ok {
		return s
	}
	if m := blockForm.FindStringSubmatch(w.form); m != nil && m[1] == w.name {
		return w.name + " {\n  $0\n}"
	}
	return ""
}

// snippetPlaceholder matches a tab stop: $1, ${1}, ${1:default} (no
// nesting), ${1|a,b|}.
var snippetPlaceholder = regexp.MustCompile(`\$(?:\d+|\{\d+(?::([^}]*))?\}|\{\d+\|([^|]*)\|\})`)

// plainSnippet is the text of a snippet without its tab stops: each
// placeholder's default, a choice's first option.
func plainSnippet(s string) string {
	return snippetPlaceholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := snippetPlaceholder.FindStringSubmatch(m)
		switch {
		case sub[1] != "":
			return sub[1]
		case sub[2] != "":
			first, _, _ := strings.Cut(sub[2], ",")
			return first
		}
		return ""
	})
}

// lineIndent returns the blanks that start the line of offset off.
func (c *cursor) lineIndent() string {
	ls := c.off
	for ls > 0 && c.src[ls-1] != '\n' {
		ls--
	}
	e := ls
	for e < len(c.src) && (c.src[e] == ' ' || c.src[e] == '\t') {
		e++
	}
	return string(c.src[ls:e])
}

// addSnippet appends the snippet item of keyword w in block head, if it
// has one.
func (c *cursor) addSnippet(head string, w word) {
	body := snippetFor(head, w)
	if body == "" || c.trigger == " " || c.trigger == "\"" {
		return
	}
	key := "snippet:" + w.name
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	format := protocol.InsertTextFormatSnippet
	if !c.snippets {
		body, format = plainSnippet(body), protocol.InsertTextFormatPlainText
	}
	if ind := c.lineIndent(); ind != "" {
		body = strings.ReplaceAll(body, "\n", "\n"+ind)
	}
	k := protocol.CompletionItemKindSnippet
	mode := protocol.InsertTextModeAsIs
	sortText := "1" + w.name // after the keywords
	filter := w.name
	detail := w.form
	c.out = append(c.out, protocol.CompletionItem{
		Label:            w.name,
		Kind:             &k,
		Detail:           &detail,
		SortText:         &sortText,
		FilterText:       &filter,
		InsertTextFormat: &format,
		InsertTextMode:   &mode,
		TextEdit:         protocol.TextEdit{Range: c.m.Range(c.replace), NewText: body},
		Documentation:    protocol.MarkupContent{Kind: protocol.MarkupKindMarkdown, Value: w.doc + "\n\n```wf\n" + plainSnippet(body) + "\n```"},
	})
}
