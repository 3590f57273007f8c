// The airlock stdio ABI (sdk/ABI.md) for Go, standard library only: the arguments arrive as
// one JSON object on stdin, the result leaves as one JSON document on stdout, logs go to
// stderr, and the program exits 0. Keep this file as it is and write the tool in main.go.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ToolError is an error the tool reports to its caller (status TOOL_ERROR) with its message
// as is. Retryable says the same call may succeed later.
type ToolError struct {
	Message   string
	Retryable bool
}

func (e *ToolError) Error() string { return e.Message }

// Fail returns a ToolError that is not retryable, its message formatted like fmt.Sprintf.
func Fail(format string, args ...any) error {
	return &ToolError{Message: fmt.Sprintf(format, args...)}
}

// RequireWorkspace returns the error "this tool needs a workspace" when the tool's profile
// grants none. The workspace is the current directory (preopened as "." and "/workspace").
func RequireWorkspace() error {
	if _, err := os.Stat("."); err != nil {
		return Fail("this tool needs a workspace")
	}
	return nil
}

// Run reads the call's arguments from stdin into a new A, calls tool with them and writes
// its result as {"ok": result}, or its error as {"error": {...}}, to stdout; then exits 0.
// Any error is reported (a ToolError keeps its Retryable flag); a panic is reported too.
func Run[A any](tool func(args A) (any, error)) {
	os.Exit(respond(func() (any, error) {
		input, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("cannot read the arguments: %w", err)
		}
		var args A
		if err := json.Unmarshal(input, &args); err != nil {
			return nil, fmt.Errorf("the arguments are not valid: %w", err)
		}
		return tool(args)
	}))
}

func respond(call func() (any, error)) (code int) {
	result, err := guarded(call)
	var document any
	if err != nil {
		message := &ToolError{Message: err.Error()}
		errors.As(err, &message)
		document = map[string]any{"error": map[string]any{
			"message": message.Message, "retryable": message.Retryable,
		}}
	} else {
		document = map[string]any{"ok": result}
	}
	out, err := json.Marshal(document)
	if err != nil {
		out, _ = json.Marshal(map[string]any{"error": map[string]any{
			"message": "cannot encode the result: " + err.Error(), "retryable": false,
		}})
	}
	if _, err := os.Stdout.Write(append(out, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "cannot write the result:", err)
		return 1
	}
	return 0
}

// guarded calls call and turns a panic into an error, so the caller still gets one document.
func guarded(call func() (any, error)) (result any, err error) {
	defer func() {
		if recovered := recover(); recovered != nil {
			err = fmt.Errorf("the tool panicked: %v", recovered)
		}
	}()
	return call()
}
