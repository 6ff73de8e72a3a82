// serve_metrics_walk_test.go tests that the tool counters' targeted walk of
// an update counts what decoding it whole would.
package main

import (
	"encoding/json"
	"log/slog"
	"testing"
)

func TestToolUpdateWalkCountsAsDecoding(t *testing.T) {
	for _, tt := range []struct {
		update string
		want   *toolSeries // nil: not counted
	}{
		{`{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"completed","content":[{"type":"content","content":{"type":"text","text":"{\"status\":\"failed\"}"}}],"_meta":{"toolName":"write_file","x":[1]}}`, &toolSeries{"write_file", "completed"}},
		{`{"_meta":{"toolName":"edit"},"status":"failed","sessionUpdate":"tool_call_update"}`, &toolSeries{"edit", toolStatusFailed}},
		{`{"sessionUpdate":"tool_call_update","status":"completed","_meta":null}`, &toolSeries{toolLabelOther, "completed"}},
		{`{"sessionUpdate":"tool_call_update","status":"completed","_meta":{"toolName":"a b"}}`, &toolSeries{toolLabelOther, "completed"}},
		{`{"sessionUpdate":"tool_call_update","status":"in_progress","_meta":{"toolName":"edit"}}`, nil},
		{`{"sessionUpdate":"tool_call_update","status":1}`, nil},
		{`{"sessionUpdate":"tool_call","status":"completed","rawInput":{"sessionUpdate":"tool_call_update"}}`, nil},
		{`{"sessionUpdate":"tool_call_update","status":"completed","_meta":"x"}`, nil},
		{`["tool_call_update"]`, nil},
		{`{"sess\u0069onUpdate":"tool_call_update","st\u0061tus":"c\u006fmpleted","_meta":{"tool\u004eame":"write\u005ffile"}}`, &toolSeries{"write_file", "completed"}},
		{`{"sessionUpdate":"tool_call_update","status":"completed","status":"in_progress"}`, nil},
		{`{"sessionUpdate":"tool_call","sessionUpdate":"tool_call_update","status":"failed","_meta":{"toolName":"edit"},"_meta":null}`, &toolSeries{"edit", toolStatusFailed}},
		{`{"sessionUpdate":"tool_call_update","status":"completed","_meta":{"toolName":"edit","toolName":1}}`, &toolSeries{toolLabelOther, "completed"}},
		{`{"sessionUpdate":"tool_call_update","status":"completed","_meta":{"toolName":"\u00e9dit"}}`, &toolSeries{toolLabelOther, "completed"}},
		{"{\"sessionUpdate\":\"tool_call_update\",\"status\":\"completed\",\"_meta\":{\"toolName\":\"ed\xffit\"}}", &toolSeries{toolLabelOther, "completed"}},
	} {
		o := newServeObserver(slog.New(slog.DiscardHandler))
		o.toolUpdate(json.RawMessage(tt.update))
		switch {
		case tt.want == nil && len(o.tools) != 0:
			t.Errorf("%s counted %v", tt.update, o.tools)
		case tt.want != nil && (len(o.tools) != 1 || o.tools[*tt.want] != 1):
			t.Errorf("%s counted %v, want %v", tt.update, o.tools, *tt.want)
		}
	}
}

// TestToolUpdateAllocatesNothingForACountedTool: the counters cost serve
// no allocation per update once a tool has been counted.
func TestToolUpdateAllocatesNothingForACountedTool(t *testing.T) {
	o := newServeObserver(slog.New(slog.DiscardHandler))
	updates := []json.RawMessage{
		json.RawMessage(`{"_meta":{"toolName":"write_file"},"kind":"edit","sessionUpdate":"tool_call","status":"pending","toolCallId":"c1"}`),
		json.RawMessage(`{"_meta":{"toolName":"write_file"},"sessionUpdate":"tool_call_update","status":"in_progress","toolCallId":"c1"}`),
		json.RawMessage(`{"_meta":{"toolName":"write_file"},"content":[{"content":{"text":"ok","type":"text"},"type":"content"}],"rawOutput":{"output":"ok"},"sessionUpdate":"tool_call_update","status":"completed","toolCallId":"c1"}`),
	}
	o.toolUpdate(updates[2])
	if n := testing.AllocsPerRun(100, func() {
		for _, u := range updates {
			o.toolUpdate(u)
		}
	}); n != 0 {
		t.Errorf("counting a tool call's updates allocated %v times, want 0", n)
	}
	if got := o.tools[toolSeries{"write_file", "completed"}]; got != 102 {
		t.Errorf("write_file completed counted %d times, want 102", got)
	}
}
