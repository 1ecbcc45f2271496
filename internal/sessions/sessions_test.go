package sessions

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDrain: a session that ends when told to is waited for; one that
// does not is cut once the time is up; no session starts once stopping.
func TestDrain(t *testing.T) {
	g := New()
	for range 2 {
		if !g.Add() {
			t.Fatal("Add refused before any stop")
		}
	}
	go func() { // ends when told to
		<-g.Stopping().Done()
		g.Done()
	}()
	go func() { // ends only when cut
		<-g.Hard().Done()
		g.Done()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if g.Drain(ctx) {
		t.Error("Drain reported every session ended though one ignored Stopping")
	}
	if g.Hard().Err() == nil {
		t.Error("Hard not done after a Drain that timed out")
	}
	if g.Add() {
		t.Error("Add took a session after Drain")
	}
}

func TestDrainAllEnd(t *testing.T) {
	g := New()
	g.Add()
	go func() {
		<-g.Stopping().Done()
		g.Done()
	}()
	if !g.Drain(context.Background()) {
		t.Error("Drain: a session that ended when told counted as cut")
	}
	if g.Hard().Err() != nil {
		t.Error("Hard done though every session ended in time")
	}
}
