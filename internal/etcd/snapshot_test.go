package etcd_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

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

// TestSnapshotWithATokenTheMemberDropped: a member refuses a token it does
// not know in place of the stream's first message (here the member dropped
// every token of root when root's password was set again; in a cluster, a
// member that has not applied the exchange of the password yet does the
// same). Nothing has been read then, so Snapshot opens the stream again
// with a renewed token rather than failing the snapshot.
func TestSnapshotWithATokenTheMemberDropped(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := testCtx(t)
	m := startCluster(t, memberOpts{})
	raw := rawClient(t, m)
	_, err := raw.RoleAdd(ctx, "root")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.UserAdd(ctx, "root", "root-pw")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.UserGrantRole(ctx, "root", "root")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.AuthEnable(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	c := dial(t, []string{m.clientURL}, etcd.WithCredentials("root", "root-pw"))
	_, err = c.Status(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred(), "the client holds a token the member knows")

	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL}, DialTimeout: 5 * time.Second,
		Username: "root", Password: "root-pw", Logger: zap.NewNop()})
	g.Expect(err).NotTo(HaveOccurred())
	defer admin.Close()
	// Setting a password drops every token of the user, the client's too.
	_, err = admin.UserChangePassword(ctx, "root", "root-pw")
	g.Expect(err).NotTo(HaveOccurred())

	s, err := c.Snapshot(ctx, m.clientURL)
	g.Expect(err).NotTo(HaveOccurred())
	verified := backup.NewChecksumReader(s)
	_, err = io.Copy(io.Discard, verified)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Close()).To(Succeed())
	g.Expect(verified.Verified()).To(BeTrue())
}
