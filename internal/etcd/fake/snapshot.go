package fake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// StorageVersion is what the fake's snapshot stream reports.
const StorageVersion = "3.7.0"

// ValidSnapshot is a stream as etcd sends it: a database of whole 4 KiB
// pages, then the SHA-256 of those bytes.
func ValidSnapshot(pages int) []byte {
	db := make([]byte, pages*4096)
	for i := range db {
		db[i] = byte(i * 7)
	}
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

// SetSnapshot scripts the bytes Snapshot streams, such as a corrupted one.
func (f *Fake) SetSnapshot(stream []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapshot = bytes.Clone(stream)
}

// Snapshot streams the scripted snapshot from a reachable member.
func (c *Client) Snapshot(ctx context.Context, endpoint string) (*etcd.SnapshotStream, error) {
	f := c.f
	if err := f.begin(ctx, c, Call{Op: etcd.OpSnapshot, Endpoints: c.Endpoints(), Endpoint: endpoint}); err != nil {
		return nil, fail(etcd.OpSnapshot, endpoint, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := c.reach(endpoint); err != nil {
		return nil, fail(etcd.OpSnapshot, endpoint, err)
	}
	f.Snapshotted = append(f.Snapshotted, endpoint)
	data := f.snapshot
	if data == nil {
		data = ValidSnapshot(2)
	}
	return &etcd.SnapshotStream{
		ReadCloser:     io.NopCloser(bytes.NewReader(bytes.Clone(data))),
		StorageVersion: func() string { return StorageVersion },
	}, nil
}

// Snapshot on the Fake itself sees every member, like its other methods.
func (f *Fake) Snapshot(ctx context.Context, endpoint string) (*etcd.SnapshotStream, error) {
	return (&Client{f: f}).Snapshot(ctx, endpoint)
}
