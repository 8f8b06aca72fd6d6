package etcd_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/bbolt"

	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// TestSnapshot streams a real member's database and checks it is what etcd
// promises: a bolt database holding the keys, followed by its SHA-256.
func TestSnapshot(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{})
	raw := rawClient(t, m)
	for i := range 100 {
		_, err := raw.Put(ctx, fmt.Sprintf("key-%03d", i), fmt.Sprintf("value-%d", i))
		g.Expect(err).NotTo(HaveOccurred())
	}
	c := dial(t, []string{m.clientURL})

	s, err := c.Snapshot(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	verified := backup.NewChecksumReader(s)
	path := filepath.Join(t.TempDir(), "snap.db")
	f, err := os.Create(path)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.Copy(f, verified)
	g.Expect(err).NotTo(HaveOccurred(), "the stream must end with a digest that matches")
	g.Expect(f.Close()).To(Succeed())
	g.Expect(s.Close()).To(Succeed())
	g.Expect(verified.Verified()).To(BeTrue())
	// A member writes its storage version a moment after it starts, so a
	// snapshot taken at once may come without one.
	g.Expect(s.StorageVersion()).To(Or(BeEmpty(), MatchRegexp(`^3\.\d+\.\d+$`)))

	// Without its digest the file is the member's bolt database.
	g.Expect(os.Truncate(path, verified.Size()-backup.TrailerSize)).To(Succeed())
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer db.Close()
	keys := 0
	g.Expect(db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("no key bucket")
		}
		keys = b.Stats().KeyN
		return nil
	})).To(Succeed())
	g.Expect(keys).To(Equal(100), "one revision per put")
}

func TestSnapshotOfAnUnreachableMember(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	dead := freeURL(t)
	c := dial(t, []string{dead})
	s, err := c.Snapshot(ctx, dead)
	if err == nil {
		// gRPC may open the stream lazily; the failure then comes on Read.
		_, err = io.Copy(io.Discard, s)
		_ = s.Close()
	}
	g.Expect(err).To(HaveOccurred())
	g.Expect(etcd.IsUnavailable(err)).To(BeTrue(), "got %v", err)
	var call *etcd.CallError
	g.Expect(errors.As(err, &call)).To(BeTrue())
	g.Expect(call.Op).To(Equal(etcd.OpSnapshot))
	g.Expect(call.Endpoint).To(Equal(dead))
}
