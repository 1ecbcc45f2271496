package engine

import (
	"errors"
	"testing"
)

func TestLoss(t *testing.T) {
	var l Loss
	select {
	case <-l.Lost():
		t.Fatal("lost before Mark")
	default:
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err before Mark: %v", err)
	}
	first, second := errors.New("first"), errors.New("second")
	l.Mark(first)
	l.Mark(second)
	<-l.Lost()
	if l.Err() != first || l.LostErr() != first {
		t.Fatalf("Err %v, LostErr %v; want the first cause", l.Err(), l.LostErr())
	}
}
