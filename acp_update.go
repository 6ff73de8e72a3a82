// acp_update.go encodes the tool-call session/update notifications, the ones
// every guarded call sends three of, by appending bytes: the same bytes the
// generic encoder made of the same update as a map (members in key order,
// no HTML escaping on the wire), without building the map (DESIGN.md §7).
package main

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

// toolPendingUpdate is the tool_call update of toolPending; rawInput is
// already encoded, diff is nil when there is no preview.
func toolPendingUpdate(id, title, kind, toolName string, rawInput []byte, diff *fileDiff) []byte {
	b := make([]byte, 0, 160+len(rawInput))
	b = appendMeta(b, toolName)
	if diff != nil {
		b = append(b, `,"content":[`...)
		b = appendDiff(b, diff)
		b = append(b, ']')
	}
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, kind, false)
	b = append(b, `,"rawInput":`...)
	b = append(b, rawInput...)
	b = append(b, `,"sessionUpdate":"tool_call","status":"pending","title":`...)
	b = appendJSONString(b, title, false)
	b = append(b, `,"toolCallId":`...)
	b = appendJSONString(b, id, false)
	return append(b, '}')
}

// toolRunningUpdate is the tool_call_update of toolRunning.
func toolRunningUpdate(id, toolName string) []byte {
	b := make([]byte, 0, 128)
	b = appendMeta(b, toolName)
	b = append(b, `,"sessionUpdate":"tool_call_update","status":"in_progress","toolCallId":`...)
	b = appendJSONString(b, id, false)
	return append(b, '}')
}

// toolFinishUpdate is the tool_call_update of finish: the diff first when
// there is one, then the output as text content.
func toolFinishUpdate(id, toolName, status, output string, diff *fileDiff, rawOutput []byte) []byte {
	b := make([]byte, 0, 192+2*len(output)+len(rawOutput))
	b = appendMeta(b, toolName)
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

// appendMeta opens the update with its _meta member, the first in key order.
func appendMeta(b []byte, toolName string) []byte {
	b = append(b, `{"_meta":{"toolName":`...)
	b = appendJSONString(b, toolName, false)
	return append(b, '}')
}

// appendDiff appends d as ACP diff tool-call content; oldText is null for
// a new file.
func appendDiff(b []byte, d *fileDiff) []byte {
	b = append(b, `{"newText":`...)
	b = appendJSONString(b, d.New, false)
	b = append(b, `,"oldText":`...)
	if d.Old == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *d.Old, false)
	}
	b = append(b, `,"path":`...)
	b = appendJSONString(b, d.Path, false)
	return append(b, `,"type":"diff"}`...)
}
