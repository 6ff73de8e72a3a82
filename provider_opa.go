// provider_opa.go owns the provider's Open Policy Agent mode ("acpguard
// provider --opa URL"): the loopback OPA data URL, the input each prepare
// sends (the prepare request plus its parsed shell commands), and the strict
// mapping of OPA's answer to a decision, failing closed on anything else
// (DESIGN.md §8 for the reason rules, §11 for the messages).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Bounds of one OPA query. opaTimeout stays under the client's default guard
// timeout (defaultGuardTimeoutMs), so that a slow OPA is answered with a
// denial from here rather than a guard failure there.
const (
	opaTimeout       = 2 * time.Second
	maxOPAResponse   = maxWireResponse
	maxOPADecisionID = 128
)

// opaFailedReason is the denial sent when OPA gave no usable decision.
const opaFailedReason = "denied: the policy provider could not get a decision from its policy engine"

// opaExampleURL is the hint of every --opa error: the data path of
// examples/policy.rego's decision rule.
const opaExampleURL = "http://127.0.0.1:8181/v1/data/acpguard/decision"

// opaPathRE is the data path after /v1/data/: rule and package names.
var opaPathRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$`)

// parseOPAURL validates --opa: an http URL on loopback (addr.go's rule)
// whose path is /v1/data/<path>, with no query, fragment, userinfo or
// escape. It returns the URL with an explicit port.
func parseOPAURL(raw string) (*url.URL, error) {
	bad := func(rule string) error {
		return usagef("--opa %q: %s (hint: --opa %s)", raw, rule, opaExampleURL)
	}
	if strings.Contains(raw, "#") || strings.Contains(raw, "%") {
		return nil, bad("must not have a fragment or percent-encoding")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, bad("not a valid URL")
	case u.Scheme != "http" || u.Opaque != "" || u.Host == "":
		return nil, bad("must be an absolute http URL")
	case u.User != nil:
		return nil, bad("must not contain userinfo")
	case u.ForceQuery || u.RawQuery != "":
		return nil, bad("must not have a query")
	}
	host, ok := loopbackHost(u.Hostname(), strings.HasPrefix(u.Host, "["))
	if !ok {
		return nil, bad("host must be 127.0.0.1, localhost or [::1]: run OPA as a sidecar on this machine")
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return nil, bad("port must not be empty")
		}
		port = "80"
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return nil, bad("port must be 1-65535")
	}
	rest, ok := strings.CutPrefix(u.Path, "/v1/data/")
	if !ok || !opaPathRE.MatchString(rest) {
		return nil, bad("path must be /v1/data/ followed by the rule's package path")
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.FormatUint(n, 10)), Path: u.Path}, nil
}

// opaClient queries one OPA data URL.
type opaClient struct {
	url string
	hc  *http.Client
}

func newOPAClient(u *url.URL) *opaClient {
	return &opaClient{url: u.String(), hc: &http.Client{
		// Loopback only: never a proxy, never a redirect.
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

func (o *opaClient) close() { o.hc.CloseIdleConnections() }

// opaCommand is one parsed simple command as OPA sees it.
type opaCommand struct {
	Argv      []string           `json:"argv"`
	Assigns   []string           `json:"assigns"`
	Redirects []opaShellRedirect `json:"redirects"`
	Complex   bool               `json:"complex"`
	Why       string             `json:"why"`
}

type opaShellRedirect struct {
	Op     string `json:"op"`
	Fd     int    `json:"fd"`
	Target string `json:"target"`
}

// opaInput is the input document: every member of the prepare request as
// sent, plus, for run_shell_command with a string command, "commands" (the
// parsed simple commands, never null) and "complex".
func opaInput(m map[string]json.RawMessage, toolName string, args map[string]any) ([]byte, error) {
	in := make(map[string]any, len(m)+2)
	for k, v := range m {
		in[k] = v
	}
	if command, ok := args["command"].(string); ok && toolName == "run_shell_command" {
		cmds, complex, _ := parseShell(command) // an error leaves complex set
		out := make([]opaCommand, 0, len(cmds))
		for _, c := range cmds {
			oc := opaCommand{Argv: nonNil(c.Argv), Assigns: nonNil(c.Assigns), Redirects: []opaShellRedirect{}, Complex: c.Complex, Why: c.Why}
			for _, r := range c.Redirects {
				oc.Redirects = append(oc.Redirects, opaShellRedirect{Op: r.Op, Fd: r.Fd, Target: r.Target})
			}
			out = append(out, oc)
		}
		in["commands"], in["complex"] = out, complex
	}
	return json.Marshal(map[string]any{"input": in})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// decide asks OPA about one prepare. It returns the decision and OPA's
// decision_id, or a wireError saying why there is no decision; the caller
// then denies (fails closed).
func (o *opaClient) decide(ctx context.Context, m map[string]json.RawMessage, toolName string, args map[string]any) (Decision, string, *wireError) {
	body, err := opaInput(m, toolName, args)
	if err != nil {
		return Decision{}, "", wireFail(failMalformedJSON, "encode the input: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opaTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return Decision{}, "", wireFail(failTransport, "%v", err)
	}
	req.Header.Set("Content-Type", wireContentType)
	resp, err := o.hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return Decision{}, "", wireFail(failTimeout, "no answer within %v", opaTimeout)
		}
		return Decision{}, "", wireFail(failTransport, "%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Decision{}, "", &wireError{Category: failHTTPStatus, Status: resp.StatusCode, Err: fmt.Errorf("status %d", resp.StatusCode)}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxOPAResponse+1))
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Decision{}, "", wireFail(failTimeout, "no whole answer within %v", opaTimeout)
	case err != nil:
		return Decision{}, "", wireFail(failTransport, "read the answer: %v", err)
	case len(data) > maxOPAResponse:
		return Decision{}, "", wireFail(failOversizeResponse, "answer larger than %d bytes", maxOPAResponse)
	}
	return decodeOPAResponse(data)
}

// decodeOPAResponse maps OPA's answer, strictly: exactly {"result":
// {"allow": bool, "reason"?: string}} and OPA's own "decision_id". No
// result (an undefined rule), another member, a reason on an allow or an
// unsafe reason is no decision. A blank reason on a deny is no reason: the
// client shows its generic text.
func decodeOPAResponse(data []byte) (Decision, string, *wireError) {
	top, werr := decodeObjectBody(data, "result", "decision_id")
	if werr != nil {
		return Decision{}, "", werr
	}
	var id string
	if _, ok := top["decision_id"]; ok {
		s, err := wireString(top, "decision_id")
		if err != nil {
			return Decision{}, "", &wireError{Category: failSchema, Err: err}
		}
		id = clipProviderText(s, maxOPADecisionID)
	}
	raw, ok := top["result"]
	if !ok {
		return Decision{}, id, wireFail(failSchema, `no "result": the rule is undefined for this input, or the --opa path names no rule`)
	}
	res, err := decodeWireObject(raw, "allow", "reason")
	if err != nil {
		return Decision{}, id, wireFail(failSchema, `"result" %s: %v; the rule must yield {"allow": bool} or {"allow": false, "reason": string}`, truncateForError(raw), err)
	}
	var d Decision
	switch string(res["allow"]) {
	case "true":
		d.Allowed = true
	case "false":
	default:
		return Decision{}, id, wireFail(failSchema, `"result.allow" is missing or not a JSON boolean`)
	}
	reason, ok := res["reason"]
	if !ok {
		return d, id, nil
	}
	if d.Allowed {
		return Decision{}, id, wireFail(failSchema, `"result.reason" on an allow`)
	}
	if d.Reason, err = shownReason(reason); err != nil {
		return Decision{}, id, &wireError{Category: failUnsafeReason, Err: err}
	}
	return d, id, nil
}

// decideOPA is the provider's decision with --opa: OPA's, or a denial
// (rule -1) when OPA gave none, logged with why and kept in the audit line.
func (p *providerServer) decideOPA(ctx context.Context, m map[string]json.RawMessage, rec *providerAuditRecord, args map[string]any) providerDecision {
	d, id, werr := p.opa.decide(ctx, m, rec.ToolName, args)
	rec.OPADecisionID = id
	if werr != nil {
		rec.OPAError = werr.Error()
		p.metrics.opaFailures.Add(1)
		p.log.Error("opa gave no decision, denying", "requestId", rec.RequestID, "category", werr.Category, "error", werr.Err.Error())
		return providerDecision{Decision: Decision{Reason: opaFailedReason}, Rule: -1}
	}
	return providerDecision{Decision: d, Rule: -1}
}
