// Package etcdload writes the data maintenance tests need: a database with
// much free space in its file, and one filled until etcd raises NOSPACE,
// with a known share of it history that a compaction frees. Every key it
// leaves live has a value derived from its name, so that a test can check
// afterwards that none was lost or changed.
//
// It is test infrastructure: the e2e suite, the benchmarks and the
// integration tests against etcd processes use it.
package etcdload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Set is the live keys a load left: Prefix/0000000 .. Prefix/(Count-1).
type Set struct {
	Prefix    string
	Count     int
	ValueSize int
}

func (s Set) key(i int) string { return fmt.Sprintf("%s/%07d", s.Prefix, i) }

// value is derived from the key, padded to size.
func value(key string, size int) string {
	head := "v-" + key + "-"
	if len(head) >= size {
		return head
	}
	return head + strings.Repeat("x", size-len(head))
}

// callTimeout bounds each call; a member busy defragmenting may take a
// while to answer.
const callTimeout = 10 * time.Second

// Fill writes values of valueSize bytes until etcd refuses a write with
// NOSPACE. Every deadEvery-th value is deleted right after it is written (0:
// none is): deleted but not compacted, it still takes its space in the
// database. It returns the live keys.
//
// The write that NOSPACE ends may have taken effect: etcd also reports
// NOSPACE for a write it applied, the one that took the backend past its
// quota. Fill reads the key back to know, and deletes a dead one whatever
// happened (deletes are allowed under NOSPACE).
func Fill(ctx context.Context, c *clientv3.Client, prefix string, valueSize, deadEvery int) (Set, error) {
	live := Set{Prefix: prefix + "/live", ValueSize: valueSize}
	dead := 0
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return live, err
		}
		if deadEvery > 0 && i%deadEvery == deadEvery-1 {
			k := fmt.Sprintf("%s/dead/%07d", prefix, dead)
			dead++
			putErr := put(ctx, c, k, value(k, valueSize))
			if putErr != nil && !etcd.IsNoSpace(putErr) {
				return live, fmt.Errorf("failed to write %s before etcd raised NOSPACE: %w", k, putErr)
			}
			if err := del(ctx, c, k); err != nil {
				return live, fmt.Errorf("failed to delete %s: %w", k, err)
			}
			if putErr != nil {
				return live, nil
			}
			continue
		}
		k := live.key(live.Count)
		putErr := put(ctx, c, k, value(k, valueSize))
		switch {
		case putErr == nil:
			live.Count++
			continue
		case !etcd.IsNoSpace(putErr):
			return live, fmt.Errorf("failed to write %s before etcd raised NOSPACE: %w", k, putErr)
		}
		applied, err := exists(ctx, c, k)
		if err != nil {
			return live, err
		}
		if applied {
			live.Count++
		}
		return live, nil
	}
}

func exists(ctx context.Context, c *clientv3.Client, k string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.Get(ctx, k, clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("failed to read %s back: %w", k, err)
	}
	return resp.Count > 0, nil
}

// Fragment writes and deletes about bytes worth of values (a tenth of them
// stay), leaving most of what it wrote as history; once compacted, it is
// free space inside the database file that only a defragmentation gives
// back.
func Fragment(ctx context.Context, c *clientv3.Client, prefix string, bytes int64, valueSize int) (Set, error) {
	live := Set{Prefix: prefix + "/live", ValueSize: valueSize}
	n := int(bytes / int64(valueSize))
	for i := 0; i < n; i++ {
		if i%10 == 0 {
			k := live.key(live.Count)
			if err := put(ctx, c, k, value(k, valueSize)); err != nil {
				return live, fmt.Errorf("failed to write %s: %w", k, err)
			}
			live.Count++
			continue
		}
		k := fmt.Sprintf("%s/dead/%07d", prefix, i)
		if err := put(ctx, c, k, value(k, valueSize)); err != nil {
			return live, fmt.Errorf("failed to write %s: %w", k, err)
		}
		if err := del(ctx, c, k); err != nil {
			return live, fmt.Errorf("failed to delete %s: %w", k, err)
		}
	}
	return live, nil
}

// Compact compacts at the current revision, physically.
func Compact(ctx context.Context, c *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := c.Get(ctx, "etcdload-revision")
	if err != nil {
		return fmt.Errorf("failed to read the revision: %w", err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil && !etcd.IsCompacted(err) {
		return fmt.Errorf("failed to compact at %d: %w", resp.Header.Revision, err)
	}
	return nil
}

// Verify reads every key of the set, in pages, and checks that each is there
// with its own value and that there are no others under its prefix.
func Verify(ctx context.Context, c *clientv3.Client, s Set) error {
	const page = 200
	seen := 0
	from := s.Prefix + "/"
	end := clientv3.GetPrefixRangeEnd(s.Prefix + "/")
	for {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := c.Get(callCtx, from, clientv3.WithRange(end), clientv3.WithLimit(page))
		cancel()
		if err != nil {
			return fmt.Errorf("failed to read %s after %d keys: %w", s.Prefix, seen, err)
		}
		for _, kv := range resp.Kvs {
			want := s.key(seen)
			if string(kv.Key) != want {
				return fmt.Errorf("key %d under %s is %s, want %s", seen, s.Prefix, kv.Key, want)
			}
			if string(kv.Value) != value(want, s.ValueSize) {
				return fmt.Errorf("key %s has another value (%d bytes)", kv.Key, len(kv.Value))
			}
			seen++
		}
		if !resp.More {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if seen != s.Count {
		return fmt.Errorf("%d keys under %s, want %d", seen, s.Prefix, s.Count)
	}
	return nil
}

// Delete deletes every key of the set.
func Delete(ctx context.Context, c *clientv3.Client, s Set) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := c.Delete(ctx, s.Prefix+"/", clientv3.WithPrefix())
	return err
}

// WaitWritable puts a key until etcd takes it, and returns how long that took.
func WaitWritable(ctx context.Context, c *clientv3.Client, key string, poll time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		err := put(ctx, c, key, "writable")
		if err == nil {
			return time.Since(start), nil
		}
		if !etcd.IsNoSpace(err) && !etcd.IsUnavailable(err) {
			return 0, fmt.Errorf("failed to write %s: %w", key, err)
		}
		select {
		case <-ctx.Done():
			return 0, errors.Join(ctx.Err(), err)
		case <-time.After(poll):
		}
	}
}

// put writes one key. It tries again while etcd could not take the request
// (a leader handoff before the operator defragments the leader drops
// proposals; a loaded machine times one out), with the same key and value,
// so a first try that took effect after all changes nothing; any other
// answer, NOSPACE above all, is the caller's.
func put(ctx context.Context, c *clientv3.Client, k, v string) error {
	return retryUnavailable(ctx, func(ctx context.Context) error {
		_, err := c.Put(ctx, k, v)
		return err
	})
}

func del(ctx context.Context, c *clientv3.Client, k string) error {
	return retryUnavailable(ctx, func(ctx context.Context) error {
		_, err := c.Delete(ctx, k)
		return err
	})
}

// callAttempts bounds the tries of one idempotent call.
const callAttempts = 5

func retryUnavailable(ctx context.Context, call func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := call(callCtx)
		cancel()
		if err == nil || !etcd.IsUnavailable(err) || attempt == callAttempts || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Dial returns a client of the endpoints, for tests.
func Dial(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}
