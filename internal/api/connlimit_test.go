package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"
)

// keepAliveClient sends requests on one kept-alive connection, as a
// client that does not retry does (Python's requests, Node's fetch, for a
// POST): a connection closed under a request it sent is a failure. It
// opens a new connection only when an answer said Connection: close.
type keepAliveClient struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
}

func (c *keepAliveClient) get(path string) error {
	if c.conn == nil {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			return err
		}
		c.conn, c.r = conn, bufio.NewReader(conn)
	}
	_ = c.conn.SetDeadline(time.Now().Add(testkit.Timeout))
	if _, err := fmt.Fprintf(c.conn, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if resp.Close {
		c.close()
	}
	return nil
}

func (c *keepAliveClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// TestEvictionSparesHonestClients: with every connection slot wanted by
// sockets that never send a request, the clients that do keep being
// served on their kept-alive connections: the silent sockets give up their
// slots first, a connection whose request has arrived is never closed,
// and near the limit answers close their connections, so that no client
// reuses one about to go.
func TestEvictionSparesHonestClients(t *testing.T) {
	const maxConns, silent, honest, rounds = 16, 24, 6, 20
	const thinkTime = 20 * time.Millisecond
	url := runOnLoopback(t, Options{MaxConns: maxConns})
	addr := strings.TrimPrefix(url, "http://")
	clients := make([]*keepAliveClient, honest)
	for i := range clients {
		clients[i] = &keepAliveClient{addr: addr}
		defer clients[i].close()
		if err := clients[i].get("/v1/models"); err != nil {
			t.Fatal(err)
		}
	}
	// The silent sockets: more than the slots; each one closed is opened
	// again, until the clients are done.
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range silent {
		wg.Go(func() {
			for {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				var b [1]byte
				_ = c.SetReadDeadline(time.Now().Add(testkit.Timeout))
				closedByServer := make(chan struct{})
				go func() { _, _ = c.Read(b[:]); close(closedByServer) }()
				select {
				case <-done:
					c.Close()
					<-closedByServer
					return
				case <-closedByServer:
					c.Close()
				}
			}
		})
	}
	defer wg.Wait()
	defer close(done)
	var failures []string
	var mu sync.Mutex
	var cw sync.WaitGroup
	for i, c := range clients {
		cw.Go(func() {
			for n := range rounds {
				// A client's think time between requests, which leaves its
				// connection idle.
				time.Sleep(thinkTime)
				if err := c.get("/v1/models"); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("client %d, request %d: %v", i, n, err))
					mu.Unlock()
					c.close()
				}
			}
		})
	}
	cw.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests of honest clients failed under silent sockets: %v", len(failures), honest*rounds, failures)
	}
}
