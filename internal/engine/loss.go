package engine

// Loss, the signal of a replica that can be lost for good.

import "sync"

// Loss is the signal of a replica that can be lost for good (a worker
// process that exits, a stage server that stops answering, a stage
// program that dies): it implements Watcher and LostReasoner for the
// engine that embeds it. The first Mark wins; the zero value is not lost
// yet and ready to use.
type Loss struct {
	once sync.Once // makes ch
	ch   chan struct{}
	mark sync.Once
	err  error // written before ch closes
}

func (l *Loss) init() { l.once.Do(func() { l.ch = make(chan struct{}) }) }

// Mark loses the replica with cause, unless it is lost already.
func (l *Loss) Mark(cause error) {
	l.init()
	l.mark.Do(func() {
		l.err = cause
		close(l.ch)
	})
}

// Lost implements Watcher: it is closed once the replica is lost.
func (l *Loss) Lost() <-chan struct{} {
	l.init()
	return l.ch
}

// LostErr implements LostReasoner: the cause the replica was lost
// with. It waits for the loss.
func (l *Loss) LostErr() error {
	<-l.Lost()
	return l.err
}

// Err returns the cause the replica was lost with, or nil while it is not
// lost.
func (l *Loss) Err() error {
	select {
	case <-l.Lost():
		return l.err
	default:
		return nil
	}
}
