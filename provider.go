// provider.go owns both ends of the provider wire contract: its constants and
// strict codec, the pinned loopback client that asks for one decision, and
// the reference provider ("acpguard provider") with its policy file and audit log.
package main

import (
	"context"
	"encoding/json"
	"errors"
)

// Texts a model and a client may see; nothing else of a provider failure is shown.
const (
	denyDefaultReason = "Tool invocation denied by host policy"
	guardFailedReason = "Tool invocation guard failed"
)

// providerClient asks the configured provider for decisions.
// STUB: owned by the provider helper.
type providerClient struct{}

func newProviderClient(cfg guardConfig) *providerClient { return &providerClient{} }

// handshake performs the startup handshake; any error means the provider is unusable.
func (c *providerClient) handshake(ctx context.Context) error { return errors.New("unimplemented") }

// prepareCall is the identity and the final call one decision is about.
type prepareCall struct {
	SessionID  string
	PromptID   string
	ToolCallID string
	ToolName   string
	Arguments  json.RawMessage // a JSON object
}

// prepareResult is the outcome of exactly one prepare attempt.
type prepareResult struct {
	RequestID string
	Allowed   bool
	Reason    string // user-visible: the provider's reason, denyDefaultReason or guardFailedReason
	Category  string // failure category, "" when the provider decided
	Err       error  // failure detail, for logs only
}

func (c *providerClient) prepare(ctx context.Context, call prepareCall) prepareResult {
	return prepareResult{Reason: guardFailedReason, Category: "transport", Err: errors.New("unimplemented")}
}

// STUB
func runProvider(ctx context.Context, sys *system, args []string) error {
	_, err := parseProviderArgs(args, sys)
	return err
}
