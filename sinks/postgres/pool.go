package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
)

// errStopped is returned by a pool after Stop.
var errStopped = errors.New("postgres sink is stopped")

// pool is a small bounded pool of pgx connections: at most size open, idle
// ones reused, broken ones closed. It stands in for pgxpool, whose puddle
// dependency is not in this module's go.sum; a transaction per batch on one
// connection is all the sink needs from it.
type pool struct {
	cfg   *pgx.ConnConfig
	slots chan struct{} // one token per connection that may be open

	mu     sync.Mutex
	idle   []*pgx.Conn
	closed bool
}

func newPool(cfg *pgx.ConnConfig, size int) *pool {
	return &pool{cfg: cfg, slots: make(chan struct{}, size)}
}

// acquire returns an idle connection or dials a new one, waiting for a slot
// while size connections are in use. reused tells which: an idle
// connection may have died with a server restart.
func (p *pool) acquire(ctx context.Context) (c *pgx.Conn, reused bool, err error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return nil, false, errStopped
	}
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !c.IsClosed() {
			p.mu.Unlock()
			return c, true, nil
		}
	}
	p.mu.Unlock()
	c, err = pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		<-p.slots
		return nil, false, err
	}
	return c, false, nil
}

// release returns c to the pool; a broken connection, or one that may
// still be inside a transaction, is closed instead of reused.
func (p *pool) release(c *pgx.Conn, broken bool) {
	defer func() { <-p.slots }()
	if !broken && !c.IsClosed() && c.PgConn().TxStatus() == 'I' {
		p.mu.Lock()
		if !p.closed {
			p.idle = append(p.idle, c)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.Close(ctx)
}

// reset closes every idle connection, so that the next acquire dials
// afresh (after DDL, cached statements of the old table are stale).
func (p *pool) reset(ctx context.Context) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.Close(ctx)
	}
}

// close closes idle connections and makes later acquires fail; connections
// in use are closed when released.
func (p *pool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	var err error
	for _, c := range idle {
		err = errors.Join(err, c.Close(ctx))
	}
	return err
}
