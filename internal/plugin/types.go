package plugin

// The types in this file are what -o json and -o yaml print. They are part
// of the plugin's interface: scripts parse them, so fields are only ever
// added, never renamed or removed. Sizes are bytes, IDs are etcd's 16-digit
// lower-case hex, and lists are never null.

// StatusReport is the output of `kubectl etcd status`, with one entry per
// EtcdCluster: the named one, or every one in the namespace.
type StatusReport struct {
	Clusters []ClusterStatus `json:"clusters"`
}

// ClusterStatus is one EtcdCluster as its members describe it.
type ClusterStatus struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// ClusterID is etcd's cluster ID; empty when no member could be asked.
	ClusterID string `json:"clusterID,omitempty"`
	// Leader is the name of the leading member; empty when none is known.
	Leader  string         `json:"leader,omitempty"`
	Members []MemberStatus `json:"members"`
	// Errors are failures that concern the whole cluster, such as the
	// member or alarm list being unavailable, or not reaching it at all.
	Errors []string `json:"errors,omitempty"`
	// TLSTransition is where turning TLS on for the running cluster stands,
	// as the operator reports it; absent when none is under way.
	TLSTransition *TLSTransition `json:"tlsTransition,omitempty"`
}

// TLSTransition is status.tls.transition, in short.
type TLSTransition struct {
	// Phase is AddingTLS, ClientsMaySwitch or RefusingPlaintext.
	Phase string `json:"phase,omitempty"`
	// Wait is what holds the next step: Restarting, PlaintextInUse (the
	// user's release-plaintext), Paused or Quorum; empty when nothing does.
	Wait string `json:"wait,omitempty"`
	// ClientsHTTPS: every member serves https and the operator uses it.
	ClientsHTTPS bool `json:"clientsHTTPS"`
}

// MemberStatus is one member: its place in etcd's membership, what it says
// about itself, and its Pod.
type MemberStatus struct {
	// Name of the member, its EtcdMember and its Pod.
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
	// Role is "voter" or "learner"; empty when unknown.
	Role string `json:"role,omitempty"`
	// Leader is true for the leader in the highest term any member knows.
	Leader bool `json:"leader"`
	// Reachable is true when the member answered; the fields from Version
	// to RaftIndex are only meaningful then.
	Reachable bool   `json:"reachable"`
	Version   string `json:"version,omitempty"`
	// Updated is true when the member runs the cluster's target template,
	// as the operator reports it; false while a rollout has not reached it.
	Updated     bool   `json:"updated"`
	DBSize      int64  `json:"dbSize"`
	DBSizeInUse int64  `json:"dbSizeInUse"`
	RaftTerm    uint64 `json:"raftTerm"`
	RaftIndex   uint64 `json:"raftIndex"`
	// Alarms are the types of the member's active alarms (NOSPACE, CORRUPT).
	Alarms []string `json:"alarms"`
	// PodPhase is the Pod's phase; empty when the member has no Pod.
	PodPhase string `json:"podPhase,omitempty"`
	PodReady bool   `json:"podReady"`
	// Error says why the member is not fully visible; empty when it is.
	Error string `json:"error,omitempty"`

	// problem is the short kind of Error, for the table's ERROR column.
	problem string
}

// MemberListReport is the output of `kubectl etcd members`: etcd's own view
// of its membership.
type MemberListReport struct {
	Cluster   string       `json:"cluster"`
	Namespace string       `json:"namespace"`
	ClusterID string       `json:"clusterID"`
	Members   []EtcdMember `json:"members"`
}

// EtcdMember is one entry of etcd's member list. URLs are what etcd
// advertises, usually cluster DNS names that resolve only in the cluster.
type EtcdMember struct {
	ID string `json:"id"`
	// Name is empty until the member has started.
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

// AlarmReport is the output of `kubectl etcd alarms list`.
type AlarmReport struct {
	Cluster   string  `json:"cluster"`
	Namespace string  `json:"namespace"`
	Alarms    []Alarm `json:"alarms"`
}

// Alarm is one active alarm.
type Alarm struct {
	MemberID string `json:"memberID"`
	// Member is the member's name; empty when etcd does not list the ID.
	Member string `json:"member,omitempty"`
	// Type is NOSPACE or CORRUPT.
	Type string `json:"type"`
}
