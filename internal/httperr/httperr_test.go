package httperr

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

// TestClassifyBusy: a memory budget that stays full is the server's
// overload, as a full queue is, also when a stage failed on it (a streamed
// call's big frame refused while the stage reads its input).
func TestClassifyBusy(t *testing.T) {
	busy := &membudget.BusyError{What: "/v1/run frames", Size: 1 << 30}
	for _, err := range []error{busy, &orchestrator.StageError{Stage: 1, Name: "b", Err: fmt.Errorf("read input: %w", busy)}} {
		status, typ, code := Classify(err)
		if status != http.StatusServiceUnavailable || typ != TypeServer || code != string(orchestrator.CodeOverloaded) {
			t.Errorf("Classify(%v) = %d %s %s, want 503 %s overloaded", err, status, typ, code, TypeServer)
		}
	}
}

// TestClassifyReplicaLost: a lost replica is the server's failure (502
// replica_lost) whatever broke when it was lost, also a stream it cut
// short, which is a payload error (issue: a killed worker reached the
// client as a 400 payload_truncated).
func TestClassifyReplicaLost(t *testing.T) {
	cut := &payload.Error{Code: payload.CodeTruncated, Message: "payload stream ends early", Err: io.ErrUnexpectedEOF}
	lost := &orchestrator.ReplicaLostError{Stage: 1, Name: "vocoder", Replica: "vocoder/1",
		Err: fmt.Errorf("%w: transport: %w", engine.ErrReplicaLost, cut)}
	status, typ, code := Classify(lost)
	if status != http.StatusBadGateway || typ != TypeServer || code != string(orchestrator.CodeReplicaLost) {
		t.Errorf("Classify(%v) = %d %s %s, want 502 %s replica_lost", lost, status, typ, code, TypeServer)
	}
	if status, _, code := Classify(cut); status != http.StatusBadRequest || code != payload.CodeTruncated {
		t.Errorf("a client's own truncated stream: %d %s, want 400 %s", status, code, payload.CodeTruncated)
	}
}
