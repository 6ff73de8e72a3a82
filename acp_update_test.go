// acp_update_test.go tests that the appended tool-call updates are the bytes
// the generic encoder made of the same update, and measures both.
package main

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// mapUpdateLine is a session/update line as the generic encoder writes it
// for the update given as a map: the reference the appended encoding of a
// tool update must equal byte for byte.
func mapUpdateLine(t *testing.T, sessionID string, u map[string]any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rpcOut{JSONRPC: rpcVersion, Method: methodSessionUpdate,
		Params: map[string]any{"sessionId": sessionID, "update": u}}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mapDiff(d *fileDiff) map[string]any {
	return map[string]any{"type": "diff", "path": d.Path, "oldText": d.oldText(), "newText": d.New}
}

// mapMeta is an update's _meta as Qwen Code's hosts read it.
func mapMeta(toolName, phase string) map[string]any {
	m := map[string]any{"toolName": toolName}
	m["provenance"], m["serverId"] = toolProvenance(toolName)
	if m["serverId"] == "" {
		delete(m, "serverId")
	}
	if phase != "" {
		m["phase"] = phase
	}
	return m
}

// appendedUpdateLine is the line sendToolUpdate writes for raw.
func appendedUpdateLine(t *testing.T, sessionID string, raw []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	a := &agent{conn: newRPCConn(bytes.NewReader(nil), &out, rpcConfig{})}
	a.sendToolUpdate(sessionID, toolEvent{raw: raw})
	return out.Bytes()
}

func TestToolUpdateEncodingEqualsMapEncoding(t *testing.T) {
	old := "line one\n<b>&amp;</b>\ttab \"quoted\" \\ back\x01\x7f é \u2028 \xff end"
	tricky := map[string]any{
		"file_path": "/w/dir/f<1>&.txt",
		"content":   old,
		"n":         json.Number("12.50"),
		"i":         int64(-3),
		"int":       42,
		"f":         1.5e21,
		"b":         true,
		"nil":       nil,
		"list":      []any{"a", json.Number("1"), map[string]any{"z": "y", "a": []any{}}, nil},
		"empty":     map[string]any{},
		"ünïcode":   "\u2029",
	}
	exit := 2
	sid := "sess-<1>\n"
	const id = "call_0123"
	line := int64(7)
	pendings := []struct {
		name       string
		title      string
		kind       string
		rawInput   any
		diff       *fileDiff
		toolName   string
		locations  []toolLocation
		wantRecord bool
	}{
		{"plain", "write_file f.txt", kindEdit, map[string]any{"file_path": "/w/f.txt", "content": "x"}, nil, "write_file", []toolLocation{{Path: "/w/f.txt"}}, true},
		{"tricky", "edit <x>", kindEdit, tricky, &fileDiff{Path: "/w/a&b", Old: &old, New: "new\r\n"}, "edit", []toolLocation{{Path: "/w/a&b<\u2028>"}}, true},
		{"new file", "write_file", kindEdit, map[string]any{}, &fileDiff{Path: "/w/n", New: ""}, "write_file", nil, true},
		{"read at a line", "read_file", kindRead, map[string]any{}, nil, "read_file", []toolLocation{{Path: "/w/r", Line: &line}}, true},
		{"unprepared raw", "bogus", kindOther, map[string]string{"raw": "not json \x00"}, nil, "bogus\u00e9", nil, true},
		{"mcp", "mcp__srv__echo", kindOther, map[string]any{"text": "x"}, nil, "mcp__srv__echo", nil, true},
	}
	for _, c := range pendings {
		u := map[string]any{
			"sessionUpdate": "tool_call",
			"toolCallId":    id,
			"title":         c.title,
			"kind":          c.kind,
			"status":        "pending",
			"_meta":         mapMeta(c.toolName, phasePreparing),
			"rawInput":      c.rawInput,
			"locations":     locationsValue(c.locations),
			"content":       []any{},
		}
		if c.diff != nil {
			u["content"] = []any{mapDiff(c.diff)}
		}
		input, err := appendJSONValue(nil, c.rawInput)
		if err != nil {
			t.Fatal(err)
		}
		h := &toolHead{id: id, title: c.title, kind: c.kind, toolName: c.toolName, rawInput: input, locations: c.locations}
		raw := toolPendingUpdate(h, c.diff)
		want, got := mapUpdateLine(t, sid, u), appendedUpdateLine(t, sid, raw)
		if !bytes.Equal(got, want) {
			t.Errorf("tool_call %s:\n got %s\nwant %s", c.name, got, want)
		}
		record, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		if got := htmlEscaped(raw); !bytes.Equal(got, record) {
			t.Errorf("kept tool_call %s:\n got %s\nwant %s", c.name, got, record)
		}

		// Its in_progress says the same of the call, as Qwen Code's does.
		u["sessionUpdate"], u["status"], u["content"], u["_meta"] = "tool_call_update", "in_progress", []any{}, mapMeta(c.toolName, "")
		if got, want := appendedUpdateLine(t, sid, toolRunningUpdate(h)), mapUpdateLine(t, sid, u); !bytes.Equal(got, want) {
			t.Errorf("in_progress %s:\n got %s\nwant %s", c.name, got, want)
		}
	}

	live := map[string]any{
		"sessionUpdate": "tool_call_update",
		"toolCallId":    id,
		"status":        "in_progress",
		"content":       []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": old}}},
		"_meta": map[string]any{"toolName": toolShell, "provenance": provenanceBuiltin,
			metaShellOutput: liveOutputMeta{Chunk: "a<b>\n\x01", Skipped: 3}},
	}
	liveRaw := toolLiveUpdate(id, toolShell, "a<b>\n\x01", old, 3)
	if got, want := appendedUpdateLine(t, sid, liveRaw), mapUpdateLine(t, sid, live); !bytes.Equal(got, want) {
		t.Errorf("live output:\n got %s\nwant %s", got, want)
	}
	if !bytes.HasPrefix(liveRaw, []byte(liveOutputUpdatePrefix)) {
		t.Errorf("live output update %s does not begin with %s, which serve looks for", liveRaw, liveOutputUpdatePrefix)
	}

	finishes := []struct {
		name   string
		status string
		output string
		raw    any
		diff   *fileDiff
	}{
		{"completed", "completed", "Wrote 1 byte to /w/f.txt", map[string]string{"output": "Wrote 1 byte to /w/f.txt"}, &fileDiff{Path: "/w/f.txt", New: "x"}},
		{"completed raw", "completed", "found <2>", map[string]any{"matches": []any{"a", "b"}, "count": int64(2)}, nil},
		{"shell", "failed", "exit 2", shellRawOutput{Type: "shell_result", Text: "a&b\n", ExitCode: &exit}, nil},
		{"cancelled", "failed", "Tool call cancelled", withOutcome(nil, "status", statusCancelled, "Tool call cancelled"), nil},
		{"denied", "failed", old, withOutcome(map[string]any{"exitCode": int64(1)}, "errorType", errTypeExecutionDenied, old), &fileDiff{Path: "/w/x", Old: &old, New: old}},
	}
	for _, c := range finishes {
		content := []any{map[string]any{
			"type":    "content",
			"content": map[string]string{"type": "text", "text": c.output},
		}}
		if c.diff != nil {
			content = append([]any{mapDiff(c.diff)}, content...)
		}
		u := map[string]any{
			"sessionUpdate": "tool_call_update",
			"toolCallId":    id,
			"status":        c.status,
			"content":       content,
			"rawOutput":     c.raw,
			"_meta":         mapMeta("run_shell_command", ""),
		}
		output, err := appendJSONValue(nil, c.raw)
		if err != nil {
			t.Fatal(err)
		}
		raw := toolFinishUpdate(id, "run_shell_command", c.status, c.output, c.diff, output)
		if got, want := appendedUpdateLine(t, sid, raw), mapUpdateLine(t, sid, u); !bytes.Equal(got, want) {
			t.Errorf("finish %s:\n got %s\nwant %s", c.name, got, want)
		}
		record, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		if got := htmlEscaped(raw); !bytes.Equal(got, record) {
			t.Errorf("kept finish %s:\n got %s\nwant %s", c.name, got, record)
		}
	}
}

// A value the encoder refuses is refused by the appended encoding too: the
// update is not sent rather than sent wrong.
func TestToolUpdateEncodingRefusesWhatTheEncoderRefuses(t *testing.T) {
	for _, v := range []any{map[string]any{"f": make(chan int)}, []any{func() {}}} {
		if _, err := appendJSONValue(nil, v); err == nil {
			t.Errorf("appendJSONValue(%T) encoded a value encoding/json refuses", v)
		}
	}
}

// BenchmarkToolUpdates encodes the three updates of one write_file call:
// as maps through the generic encoder (the reference), and appended.
func BenchmarkToolUpdates(b *testing.B) {
	args := map[string]any{"file_path": "/home/user/project/src/f1.txt", "content": "hello world\n"}
	d := &fileDiff{Path: "/home/user/project/src/f1.txt", New: "hello world\n"}
	const id, sid, tool = "call_0123456789abcdef01234567", "sess_0123456789abcdef", "write_file"
	output := "Wrote 12 bytes to /home/user/project/src/f1.txt"
	rawOut := map[string]any{"path": d.Path, "bytes": 12}
	locs := []toolLocation{{Path: d.Path}}
	b.Run("map", func(b *testing.B) {
		enc := json.NewEncoder(io.Discard)
		enc.SetEscapeHTML(false)
		send := func(u map[string]any) {
			if err := enc.Encode(rpcOut{JSONRPC: rpcVersion, Method: methodSessionUpdate,
				Params: map[string]any{"sessionId": sid, "update": u}}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for range b.N {
			send(map[string]any{"sessionUpdate": "tool_call", "toolCallId": id, "title": "f1.txt", "kind": kindEdit,
				"status": "pending", "_meta": mapMeta(tool, phasePreparing), "rawInput": args, "content": []any{mapDiff(d)},
				"locations": locationsValue(locs)})
			send(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress", "title": "f1.txt",
				"kind": kindEdit, "rawInput": args, "content": []any{}, "locations": locationsValue(locs), "_meta": mapMeta(tool, "")})
			send(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "completed",
				"content":   []any{mapDiff(d), map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": output}}},
				"rawOutput": rawOut, "_meta": mapMeta(tool, "")})
		}
	})
	b.Run("appended", func(b *testing.B) {
		a := &agent{conn: newRPCConn(bytes.NewReader(nil), io.Discard, rpcConfig{})}
		b.ReportAllocs()
		for range b.N {
			input, _ := appendJSONValue(nil, args)
			h := &toolHead{id: id, title: "f1.txt", kind: kindEdit, toolName: tool, rawInput: input, locations: locs}
			a.sendToolUpdate(sid, toolEvent{raw: toolPendingUpdate(h, d)})
			a.sendToolUpdate(sid, toolEvent{raw: toolRunningUpdate(h)})
			out, _ := appendJSONValue(nil, rawOut)
			a.sendToolUpdate(sid, toolEvent{raw: toolFinishUpdate(id, tool, "completed", output, d, out)})
		}
	})
}
