package chaos

import (
	"strings"
	"testing"
)

func hashes(hs ...uint32) []MemberHash {
	var out []MemberHash
	for i, h := range hs {
		out = append(out, MemberHash{Member: string(rune('c' + i)), Revision: 40, HashRevision: 40, CompactRevision: 1, Hash: h})
	}
	return out
}

func TestCompareHashesEqual(t *testing.T) {
	if v := CompareHashes(hashes(7, 7, 7)); len(v) != 0 {
		t.Fatalf("equal hashes: %v", v)
	}
	// etcd reports compact revision -1 before its first compaction.
	never := hashes(7, 7, 7)
	for i := range never {
		never[i].CompactRevision = -1
	}
	if v := CompareHashes(never); len(v) != 0 {
		t.Fatalf("equal hashes, never compacted: %v", v)
	}
	if v := CompareHashes(nil); len(v) != 0 {
		t.Fatalf("no member: %v", v)
	}
}

// An etcd 3.5 member answers HashKV without hash_revision, which reads 0:
// its hash is at the revision asked and compares like any other.
func TestCompareHashesAcceptsNoHashRevisionFrom35(t *testing.T) {
	hs := hashes(7, 7, 7)
	hs[0].HashRevision, hs[2].HashRevision = 0, 0
	if v := CompareHashes(hs); len(v) != 0 {
		t.Fatalf("3.5 members that give no hash revision: %v", v)
	}
	hs[1].Hash = 8
	if v := CompareHashes(hs); len(v) != 1 || !strings.Contains(v[0].Detail, "members differ at revision 40") {
		t.Fatalf("a 3.5 member that differs must still be caught, got %v", v)
	}
}

func TestCompareHashesReportsEachDifference(t *testing.T) {
	cases := []struct {
		name   string
		hs     []MemberHash
		detail string
	}{
		{"one member differs", hashes(7, 7, 8), "members differ at revision 40"},
		{"first member differs", hashes(8, 7, 7), "00000008"},
		{"a member gave no hash", func() []MemberHash {
			h := hashes(7, 7, 7)
			h[1].Err = "future revision"
			return h
		}(), "d: no hash at revision 40: future revision"},
		// A member behind on a compaction hashes more revisions: its hash
		// differs without any difference in the data, so it is not
		// compared, but it is reported.
		{"a member behind on a compaction", func() []MemberHash {
			h := hashes(7, 7, 9)
			h[0].CompactRevision, h[1].CompactRevision = 40, 40
			h[0].Hash, h[1].Hash = 8, 8
			return h
		}(), "e had not applied the compaction at 40"},
		{"a member answered for another revision", func() []MemberHash {
			h := hashes(7, 7, 7)
			h[2].HashRevision = 41
			return h
		}(), "e answered for revision 41, asked at 40"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := CompareHashes(c.hs)
			if len(v) != 1 || v[0].Invariant != InvHashKV || !strings.Contains(v[0].Detail, c.detail) {
				t.Fatalf("want one %s violation with %q, got %v", InvHashKV, c.detail, v)
			}
		})
	}
}
