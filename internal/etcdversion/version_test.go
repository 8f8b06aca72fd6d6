package etcdversion_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
	"github.com/quorumctl/etcd-operator/test/localcluster"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want etcdversion.Version
		err  string
	}{
		{in: "3.6.16", want: etcdversion.Version{Major: 3, Minor: 6, Patch: 16}},
		{in: "v3.5.35", want: etcdversion.Version{Major: 3, Minor: 5, Patch: 35}},
		{in: "3.7.0", want: etcdversion.Version{Major: 3, Minor: 7}},
		{in: "3.6", err: "MAJOR.MINOR.PATCH"},
		{in: "3.6.16.1", err: "MAJOR.MINOR.PATCH"},
		{in: "3.6.16-rc.0", err: "MAJOR.MINOR.PATCH"},
		{in: "3.6.x", err: "MAJOR.MINOR.PATCH"},
		{in: "03.6.1", err: "MAJOR.MINOR.PATCH"},
		{in: "3.+6.1", err: "MAJOR.MINOR.PATCH"},
		{in: "3..1", err: "MAJOR.MINOR.PATCH"},
		{in: "", err: "MAJOR.MINOR.PATCH"},
		{in: "3.6.99999999999999999999", err: "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			v, err := etcdversion.Parse(tc.in)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				g.Expect(err).To(MatchError(ContainSubstring(`"` + tc.in + `"`)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v).To(Equal(tc.want))
			g.Expect(v.String()).To(Equal(strings.TrimPrefix(tc.in, "v")))
		})
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b string
		want int
		same bool
	}{
		{a: "3.6.16", b: "3.6.16", want: 0, same: true},
		{a: "3.6.15", b: "3.6.16", want: -1, same: true},
		{a: "3.6.16", b: "3.5.35", want: 1},
		{a: "3.5.99", b: "3.6.0", want: -1},
		{a: "4.0.0", b: "3.9.9", want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.a+" vs "+tc.b, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			a, b := etcdversion.MustParse(tc.a), etcdversion.MustParse(tc.b)
			g.Expect(a.Compare(b)).To(Equal(tc.want))
			g.Expect(b.Compare(a)).To(Equal(-tc.want))
			g.Expect(a.SameMinor(b)).To(Equal(tc.same))
		})
	}
	NewWithT(t).Expect(etcdversion.MustParse("3.6.16").MinorString()).To(Equal("3.6"))
}

// TestPinnedVersionsAreSupported keeps the policy in step with what the
// project ships: every etcd version in versions.env, and the API's default,
// must be one the policy and the flag tables know.
func TestPinnedVersionsAreSupported(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	wd, err := os.Getwd()
	g.Expect(err).NotTo(HaveOccurred())
	root, err := localcluster.FindRepoRoot(filepath.Clean(wd))
	g.Expect(err).NotTo(HaveOccurred())
	pinned, err := localcluster.LoadVersions(root)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range append(pinned.Etcd, pinned.EtcdDefault, v1alpha1.DefaultEtcdVersion) {
		v, err := etcdversion.Parse(s)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = etcdversion.Flags(v, etcdversion.Settings{})
		g.Expect(err).NotTo(HaveOccurred(), "etcd %s is pinned but not supported", s)
		_, err = etcdversion.Decide(etcdversion.Cluster{Members: []etcdversion.Version{v}}, v)
		g.Expect(err).NotTo(HaveOccurred(), "etcd %s is pinned but not supported", s)
	}
}
