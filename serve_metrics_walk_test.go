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
