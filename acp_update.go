// acp_update.go encodes the tool-call session/update notifications, the ones
// every guarded call sends three of, by appending bytes: the same bytes the
// generic encoder made of the same update as a map (members in key order,
// no HTML escaping on the wire), without building the map (DESIGN.md §7).
package main

import (
	"strconv"
	"strings"
)

// toolEvent is one tool_call or tool_call_update as it is sent: a JSON
// object, compact, members in key order.
type toolEvent struct {
	id   string // toolCallId
	kind string // tool_call or tool_call_update
	// status is the update's status: a tool_call_update that is completed
	// or failed, like every tool_call, is kept for session/load.
	status string
	raw    []byte
}

// kept reports whether the session record keeps u, as sessionRecord.note
// decides for an update given as a map.
func (u *toolEvent) kept() bool {
	return u.kind == "tool_call" || (u.kind == "tool_call_update" && (u.status == "completed" || u.status == "failed"))
}

// sendToolUpdate records u when the session keeps it and sends it.
func (a *agent) sendToolUpdate(sessionID string, u toolEvent) {
	if a.history != nil && u.kept() && u.id != "" {
		if s := a.session(sessionID); s != nil {
			s.record.noteRaw(u.id, htmlEscaped(u.raw))
		}
	}
	b := make([]byte, 0, len(sessionID)+len(u.raw)+80)
	b = appendNotifyStart(b, methodSessionUpdate)
	b = append(b, `{"sessionId":`...)
	b = appendJSONString(b, sessionID, false)
	b = append(b, `,"update":`...)
	b = append(b, u.raw...)
	b = append(b, "}}\n"...)
	if err := a.conn.notifyLine(methodSessionUpdate, b); err != nil {
		a.log.Warn("send session/update", "session", sessionID, "err", err)
	}
}

// toolHead is what a call's tool_call and its in_progress update both
// say of it: rawInput is already encoded.
type toolHead struct {
	id, title, kind, toolName string
	rawInput                  []byte
	locations                 []toolLocation
}

// toolPendingUpdate is the tool_call update of toolPending, in Qwen Code's
// preparing phase; diff is nil when there is no preview.
func toolPendingUpdate(h *toolHead, diff *fileDiff) []byte {
	b := make([]byte, 0, 192+len(h.rawInput))
	b = appendMeta(b, h.toolName, phasePreparing)
	b = append(b, `,"content":[`...)
	if diff != nil {
		b = appendDiff(b, diff)
	}
	b = append(b, ']')
	return appendHead(b, h, "tool_call", "pending")
}

// toolRunningUpdate is the tool_call_update of toolRunning: the call as it
// was announced, now in_progress, as Qwen Code sends it.
func toolRunningUpdate(h *toolHead) []byte {
	b := make([]byte, 0, 192+len(h.rawInput))
	b = appendMeta(b, h.toolName, "")
	b = append(b, `,"content":[]`...)
	return appendHead(b, h, "tool_call_update", "in_progress")
}

// appendHead appends h's members after content, in key order, with the
// update's kind and status, and closes the update.
func appendHead(b []byte, h *toolHead, update, status string) []byte {
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, h.kind, false)
	b = append(b, `,"locations":`...)
	b = appendLocations(b, h.locations)
	b = append(b, `,"rawInput":`...)
	b = append(b, h.rawInput...)
	b = append(b, `,"sessionUpdate":`...)
	b = appendJSONString(b, update, false)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, status, false)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, h.title, false)
	b = append(b, `,"toolCallId":`...)
	b = appendJSONString(b, h.id, false)
	return append(b, '}')
}

// appendLocations appends locs as ACP locations, [] for none.
func appendLocations(b []byte, locs []toolLocation) []byte {
	b = append(b, '[')
	for i, l := range locs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"line":`...)
		if l.Line == nil {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendInt(b, *l.Line, 10)
		}
		b = append(b, `,"path":`...)
		b = appendJSONString(b, l.Path, false)
		b = append(b, '}')
	}
	return append(b, ']')
}

// toolFinishUpdate is the tool_call_update of finish: the diff first when
// there is one, then the output as text content.
func toolFinishUpdate(id, toolName, status, output string, diff *fileDiff, rawOutput []byte) []byte {
	b := make([]byte, 0, 192+2*len(output)+len(rawOutput))
	b = appendMeta(b, toolName, "")
	b = append(b, `,"content":[`...)
	if diff != nil {
		b = appendDiff(b, diff)
		b = append(b, ',')
	}
	b = append(b, `{"content":{"text":`...)
	b = appendJSONString(b, output, false)
	b = append(b, `,"type":"text"},"type":"content"}],"rawOutput":`...)
	b = append(b, rawOutput...)
	b = append(b, `,"sessionUpdate":"tool_call_update","status":`...)
	b = appendJSONString(b, status, false)
	b = append(b, `,"toolCallId":`...)
	b = appendJSONString(b, id, false)
	return append(b, '}')
}

// appendMeta opens the update with its _meta member, the first in key
// order: the phase when one is given, the tool's provenance, and its name.
func appendMeta(b []byte, toolName, phase string) []byte {
	b = append(b, `{"_meta":{`...)
	if phase != "" {
		b = append(b, `"phase":`...)
		b = appendJSONString(b, phase, false)
		b = append(b, ',')
	}
	provenance, server := toolProvenance(toolName)
	b = append(b, `"provenance":`...)
	b = appendJSONString(b, provenance, false)
	if server != "" {
		b = append(b, `,"serverId":`...)
		b = appendJSONString(b, server, false)
	}
	b = append(b, `,"toolName":`...)
	b = appendJSONString(b, toolName, false)
	return append(b, '}')
}

// appendDiff appends d as ACP diff tool-call content. oldText is "" for a
// new file: ACP allows null there, but Qwen Code sends a string and its
// hosts read one.
func appendDiff(b []byte, d *fileDiff) []byte {
	b = append(b, `{"newText":`...)
	b = appendJSONString(b, d.New, false)
	b = append(b, `,"oldText":`...)
	b = appendJSONString(b, d.oldText(), false)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, d.Path, false)
	return append(b, `,"type":"diff"}`...)
}

// toolLocation is one ACP location of a call: the file it reads or
// changes, and for read_file the line it starts at (null: none).
type toolLocation struct {
	Path string
	Line *int64
}

// toolLocations are the locations Qwen Code's tools report for their final
// arguments: read_file its file at offset, write_file and edit their file,
// every other tool none.
func toolLocations(tool string, args map[string]any) []toolLocation {
	p, ok := args["file_path"].(string)
	if !ok || p == "" {
		return nil
	}
	switch tool {
	case toolReadFile:
		loc := toolLocation{Path: p}
		if _, given := args["offset"]; given {
			n := argInt(args, "offset", 0)
			loc.Line = &n
		}
		return []toolLocation{loc}
	case toolWriteFile, toolEdit:
		return []toolLocation{{Path: p}}
	}
	return nil
}

// Provenances of a call as Qwen Code's hosts read _meta.provenance: an MCP
// server's tool carries its server's name as _meta.serverId.
const (
	provenanceBuiltin = "builtin"
	provenanceMCP     = "mcp"
)

// toolProvenance is the provenance of the tool named name and, for an MCP
// tool (mcp__<server>__<tool>), its server.
func toolProvenance(name string) (provenance, serverID string) {
	if rest, ok := strings.CutPrefix(name, mcpToolPrefix); ok {
		if server, _, found := strings.Cut(rest, mcpToolNameSeparator); found && server != "" {
			return provenanceMCP, server
		}
	}
	return provenanceBuiltin, ""
}

// phasePreparing is _meta.phase of a call's tool_call: announced, not yet
// decided nor run, as Qwen Code marks it.
const phasePreparing = "preparing"

// toolOutput sends a running command's output so far (tools_shell_live.go)
// as a tool_call_update in_progress of the call.
func (o *callObserver) toolOutput(chunk, tail string, skipped int64) {
	o.a.sendToolUpdate(o.sessionID, toolEvent{id: o.head.id, kind: "tool_call_update", status: "in_progress",
		raw: toolLiveUpdate(o.head.id, o.head.toolName, chunk, tail, skipped)})
}

// toolLiveUpdate is a live output update: it begins with
// liveOutputUpdatePrefix for a built-in tool, which serve relies on.
func toolLiveUpdate(id, toolName, chunk, tail string, skipped int64) []byte {
	b := make([]byte, 0, 224+2*(len(chunk)+len(tail)))
	provenance, _ := toolProvenance(toolName)
	b = append(b, `{"_meta":{"provenance":`...)
	b = appendJSONString(b, provenance, false)
	b = append(b, `,"`+metaShellOutput+`":{"chunk":`...)
	b = appendJSONString(b, chunk, false)
	b = append(b, `,"skipped":`...)
	b = strconv.AppendInt(b, skipped, 10)
	b = append(b, `},"toolName":`...)
	b = appendJSONString(b, toolName, false)
	b = append(b, `},"content":[{"content":{"text":`...)
	b = appendJSONString(b, tail, false)
	b = append(b, `,"type":"text"},"type":"content"}],"sessionUpdate":"tool_call_update","status":"in_progress","toolCallId":`...)
	b = appendJSONString(b, id, false)
	return append(b, '}')
}

// permissionContent is a permission request's toolCall content, as Qwen
// Code's: the diff an edit or write_file would make (previewChange), none
// for other tools or a change not shown.
func permissionContent(s *session, spec *toolSpec, args map[string]any) []any {
	if spec.Kind != kindEdit {
		return []any{}
	}
	d := previewChange(&toolEnv{Cwd: s.cwd, Workspace: s.workspace}, spec.Name, args)
	if d == nil {
		return []any{}
	}
	return []any{map[string]any{"type": "diff", "path": d.Path, "oldText": d.oldText(), "newText": d.New}}
}

// locationsValue is locs for the generic encoder, as appendLocations
// writes them.
func locationsValue(locs []toolLocation) []any {
	out := make([]any, 0, len(locs))
	for _, l := range locs {
		out = append(out, map[string]any{"path": l.Path, "line": l.Line})
	}
	return out
}
