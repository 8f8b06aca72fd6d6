package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// InvHashKV is the invariant that every member, hashed at one revision,
// holds the same key-value store: the check etcd's robustness suite ends
// with. Members that agree on every read through the checker's clients can
// still differ in what none of them was asked, such as a key a member
// applied twice or never, or a revision it numbered differently.
const InvHashKV = "hashkv-equal"

// MemberHash is one member's HashKV answer.
type MemberHash struct {
	Member string `json:"member"`
	// Revision is the revision the hash was asked at; HashRevision the one
	// the member answered for, equal unless it answered for another. etcd
	// 3.5 has no hash_revision in its answer (3.6 added it), so a 3.5
	// member answers 0: it hashed at the revision asked, or it would have
	// answered with an error.
	Revision        int64  `json:"revision"`
	HashRevision    int64  `json:"hashRevision"`
	CompactRevision int64  `json:"compactRevision"`
	Hash            uint32 `json:"hash"`
	// Err is why the member gave no hash at the revision.
	Err string `json:"error,omitempty"`
	// Raft is the member's own raft view (leader, term, indexes), taken
	// when it stayed behind a compaction another member had applied: what
	// the next reader needs to tell a stuck apply from a member elsewhere.
	Raft string `json:"raft,omitempty"`
}

func (h MemberHash) String() string {
	if h.Err != "" {
		return fmt.Sprintf("%s: no hash at revision %d: %s", h.Member, h.Revision, h.Err)
	}
	if h.Raft != "" {
		return fmt.Sprintf("%s: %08x at revision %d (compacted at %d; %s)", h.Member, h.Hash, h.HashRevision, h.CompactRevision, h.Raft)
	}
	return fmt.Sprintf("%s: %08x at revision %d (compacted at %d)", h.Member, h.Hash, h.HashRevision, h.CompactRevision)
}

// CompareHashes checks the members' hashes at one revision: each member
// answered, for the revision asked, at the same compaction, and every hash
// is the same. A member that gave no hash is a violation too: the epoch
// ends only once the cluster has recovered, so every member must have
// caught up to the revision.
//
// HashKV hashes the revisions after the member's compaction only, so two
// members that have applied different compactions give different hashes of
// the same data; etcd's own corruption check compares only hashes of equal
// compact revisions, and so does this. The runner asks a member behind on a
// compaction again until it has applied it (hashMembers), so one still
// behind is reported as such, not as a difference in the data.
func CompareHashes(hashes []MemberHash) []Violation {
	var out []Violation
	hs := slices.Clone(hashes)
	slices.SortFunc(hs, func(a, b MemberHash) int { return strings.Compare(a.Member, b.Member) })
	var ok []MemberHash
	for _, h := range hs {
		switch {
		case h.Err != "":
			out = append(out, violation(InvHashKV, "%s", h))
		case h.HashRevision != 0 && h.HashRevision != h.Revision:
			out = append(out, violation(InvHashKV, "%s answered for revision %d, asked at %d", h.Member, h.HashRevision, h.Revision))
		default:
			ok = append(ok, h)
		}
	}
	if len(ok) == 0 {
		return out
	}
	// etcd reports -1 before its first compaction.
	compacted := slices.MaxFunc(ok, func(a, b MemberHash) int { return cmp.Compare(a.CompactRevision, b.CompactRevision) }).CompactRevision
	ok = slices.DeleteFunc(ok, func(h MemberHash) bool {
		if h.CompactRevision == compacted {
			return false
		}
		out = append(out, violation(InvHashKV, "%s had not applied the compaction at %d: %s", h.Member, compacted, h))
		return true
	})
	for _, h := range ok[min(1, len(ok)):] {
		if h.Hash != ok[0].Hash {
			var all []string
			for _, h := range ok {
				all = append(all, h.String())
			}
			out = append(out, violation(InvHashKV, "members differ at revision %d: %s", ok[0].Revision, strings.Join(all, "; ")))
			break
		}
	}
	return out
}
