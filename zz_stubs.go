package main

// TEMPORARY: stands in for colleagues' declarations until the merge.
type toolSpec struct{}

func canonicalToolName(name string) (string, bool) { return name, true }

const (
	envPrivateGuard      = "QWEN_CODE_PRIVATE_EXTERNAL_TOOL_GUARD"
	envPrivateCapability = "QWEN_CODE_PRIVATE_ACP_CAPABILITY"
	privateGuardMarker   = "required-v1"
)
