package live

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console"
)

// Options tune a Source.
type Options struct {
	// Cluster names the cluster in the views (kubeconfig context or API server URL).
	Cluster string
	// SyncTimeout bounds the first sync of the informers (default 30s).
	SyncTimeout time.Duration
	// RetryAfter is how long a failed start (forbidden, not installed, unreachable) is remembered before the
	// next Snapshot tries again (default 5s).
	RetryAfter time.Duration
	// Clock tells the time (default the real clock; tests pass a fake).
	Clock clock.PassiveClock

	// The rest is for a Pool of per-caller sources.

	// MaxSources bounds the callers whose informers a Pool keeps (default 32); the least recently used goes.
	MaxSources int
	// TokenReview, when set, checks a caller's token before a Pool spends informers on it, and again every
	// RecheckEvery (default 5m): a revoked or expired token stops reading at the next check.
	//
	// An error wrapping the review call's own failure (an API status such as 5xx or 429, or 401/403 for the
	// console's own credentials; a transport error; a timeout) means the token could not be reviewed: the
	// request fails with it and nothing is remembered. Any other error is the API server's refusal.
	TokenReview  func(ctx context.Context, token string) error
	RecheckEvery time.Duration
	// RefusedFor is how long a refused token is refused again from memory, without a TokenReview (default
	// 15s; the memory holds the tokens' hashes and is bounded).
	RefusedFor time.Duration
	// NewTokenRate and NewTokenBurst limit the TokenReviews of tokens the pool has no source for, per
	// client (see WithClient; default 2 a second after a burst of 10). Known tokens, their rechecks included,
	// and tokens refused from memory are never limited.
	NewTokenRate  rate.Limit
	NewTokenBurst int
}

func (o Options) withDefaults() Options {
	if o.SyncTimeout == 0 {
		o.SyncTimeout = 30 * time.Second
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MaxSources <= 0 {
		o.MaxSources = 32
	}
	if o.RecheckEvery <= 0 {
		o.RecheckEvery = 5 * time.Minute
	}
	if o.RefusedFor <= 0 {
		o.RefusedFor = 15 * time.Second
	}
	if o.NewTokenRate <= 0 {
		o.NewTokenRate = 2
	}
	if o.NewTokenBurst <= 0 {
		o.NewTokenBurst = 10
	}
	return o
}

// Source is a live cluster read through informers with the credentials of one rest.Config: what the
// caller may not read is either an *console.AccessError (LVMNodes) or listed as hidden in the snapshot.
type Source struct {
	cfg    *rest.Config
	opts   Options
	life   context.Context
	scheme *runtime.Scheme

	mu        sync.Mutex
	started   bool
	failedAt  time.Time
	failure   error
	installed bool
	user      string
	hidden    []console.HiddenKind
	kinds     []kind
	cache     cache.Cache
	last      *console.Snapshot
	lastGen   uint64

	// gen counts changes seen by the informers; subs are the subscribers. They have their own lock because
	// informer handlers run while Snapshot holds mu during the first sync.
	gen   atomic.Uint64
	subMu sync.Mutex
	subs  map[chan struct{}]struct{}
}

var (
	_ console.Source   = (*Source)(nil)
	_ console.Notifier = (*Source)(nil)
)

// New returns a source for cfg. Informers start on the first Snapshot and run until life is done.
func New(life context.Context, cfg *rest.Config, opts Options) *Source {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	return &Source{cfg: cfg, opts: opts.withDefaults(), life: life, scheme: api.NewScheme(), subs: map[chan struct{}]struct{}{}}
}

// Snapshot returns the current state from the informers' caches. The first call discovers the APIs,
// checks what the caller may read and starts the informers; a caller who may not list LVMNodes gets an
// *console.AccessError.
func (s *Source) Snapshot(ctx context.Context) (*console.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		if err := s.startLocked(ctx); err != nil {
			return nil, err
		}
		if !s.installed {
			return &console.Snapshot{At: s.opts.Clock.Now(), Cluster: s.opts.Cluster, User: s.user, Installed: false}, nil
		}
	}
	gen := s.gen.Load()
	if s.last != nil && s.lastGen == gen {
		return s.last, nil
	}
	snap, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	s.last, s.lastGen = snap, gen
	return snap, nil
}

// startLocked discovers, checks access and starts the informers; a failure is remembered for RetryAfter.
func (s *Source) startLocked(ctx context.Context) error {
	now := s.opts.Clock.Now()
	if !s.failedAt.IsZero() && now.Sub(s.failedAt) < s.opts.RetryAfter {
		return s.failure
	}
	err := s.start(ctx)
	if err != nil {
		s.failedAt, s.failure = now, err
		return err
	}
	if !s.installed {
		// Check again later: LVMS may be installed while the console runs.
		s.failedAt, s.failure = now, nil
	}
	return nil
}

func (s *Source) start(ctx context.Context) error {
	direct, err := client.New(s.cfg, client.Options{Scheme: s.scheme})
	if err != nil {
		return fmt.Errorf("client for %s: %w", s.cfg.Host, err)
	}
	served, err := discover(s.cfg)
	if err != nil {
		return err
	}
	s.user = whoAmI(ctx, direct)
	s.installed = served.lvms()
	if !s.installed {
		return nil
	}
	kinds, hidden, err := checkAccess(ctx, direct, served, s.user)
	if err != nil {
		return err
	}
	c, err := cache.New(s.cfg, cache.Options{Scheme: s.scheme, DefaultTransform: cache.TransformStripManagedFields(),
		ReaderFailOnMissingInformer: true, ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: slimPod}}})
	if err != nil {
		return fmt.Errorf("informer cache: %w", err)
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.changed() },
		UpdateFunc: func(any, any) { s.changed() },
		DeleteFunc: func(any) { s.changed() },
	}
	// The informers run until life is done, or stop at once if this start fails half-way.
	life, stop := context.WithCancel(s.life)
	started := false
	defer func() {
		if !started {
			stop()
		}
	}()
	for _, k := range kinds {
		inf, err := c.GetInformer(life, k.newObject())
		if err != nil {
			return fmt.Errorf("informer for %s: %w", k.resource, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch %s: %w", k.resource, err)
		}
	}
	go func() { _ = c.Start(life) }()
	syncCtx, cancel := context.WithTimeout(ctx, s.opts.SyncTimeout)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		return fmt.Errorf("the informers for %s did not sync within %s: is the API server reachable?", s.cfg.Host, s.opts.SyncTimeout)
	}
	s.cache, s.kinds, s.hidden, s.started = c, kinds, hidden, true
	started = true
	return nil
}

// changed records a change and tells the subscribers (one pending value each, so changes coalesce).
func (s *Source) changed() {
	s.gen.Add(1)
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Subscribe returns a channel that receives a value after the cluster's state changed.
func (s *Source) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.subMu.Lock()
	s.subs[ch] = struct{}{}
	s.subMu.Unlock()
	go func() {
		<-ctx.Done()
		s.subMu.Lock()
		delete(s.subs, ch)
		s.subMu.Unlock()
		close(ch)
	}()
	return ch
}

// read lists every permitted kind from the cache into a snapshot.
func (s *Source) read(ctx context.Context) (*console.Snapshot, error) {
	snap := &console.Snapshot{At: s.opts.Clock.Now(), Cluster: s.opts.Cluster, User: s.user, Installed: true,
		Hidden: append([]console.HiddenKind(nil), s.hidden...)}
	for _, k := range s.kinds {
		if err := k.read(ctx, s.cache, snap); err != nil {
			return nil, fmt.Errorf("read %s from the cache: %w", k.resource, err)
		}
	}
	snap.Sort()
	return snap, nil
}

// whoAmI asks the API server who the credentials belong to ("" when it cannot say).
func whoAmI(ctx context.Context, c client.Client) string {
	r := &authnv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return ""
	}
	return r.Status.UserInfo.Username
}

// slimPod keeps what the volumes view needs of a pod (name, node, claims), so caching every pod of a big
// cluster stays cheap.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: p.TypeMeta}
	slim.Name, slim.Namespace, slim.UID, slim.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	slim.Spec.NodeName = p.Spec.NodeName
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			slim.Spec.Volumes = append(slim.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim}})
		}
	}
	slim.Status.Phase = p.Status.Phase
	return slim, nil
}

// errNoKinds guards against a programming error in the kind table.
var errNoKinds = errors.New("no kinds to read")

// kinds the console reads; read appends the cached objects to the snapshot.
type kind struct {
	resource string
	group    string
	// required kinds make the console useless when forbidden: the caller gets an AccessError.
	required bool
	// optional kinds are newer than their group/version: a server that serves the group but not the kind
	// (older CRDs) has none of them, which is neither hidden nor an error.
	optional  bool
	newObject func() client.Object
	read      func(ctx context.Context, r client.Reader, s *console.Snapshot) error
}

func listInto[L client.ObjectList](ctx context.Context, r client.Reader, list L) (L, error) {
	err := r.List(ctx, list, client.UnsafeDisableDeepCopy)
	return list, err
}

var allKinds = []kind{
	{resource: "lvmnodesets.lvm.topolvm.io", group: groupLVMv2, newObject: func() client.Object { return &lvmv2.LVMNodeSet{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &lvmv2.LVMNodeSetList{})
			s.LVMNodeSets = l.Items
			return err
		}},
	{resource: "lvmnodes.lvm.topolvm.io", group: groupLVMv2, required: true, newObject: func() client.Object { return &lvmv2.LVMNode{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &lvmv2.LVMNodeList{})
			s.LVMNodes = l.Items
			return err
		}},
	{resource: "lvmclusters.lvm.topolvm.io", group: groupLVMv1, newObject: func() client.Object { return &lvmv1.LVMCluster{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &lvmv1.LVMClusterList{})
			s.LVMClusters = l.Items
			return err
		}},
	{resource: "lvmvolumegroups.lvm.topolvm.io", group: groupLVMv1, newObject: func() client.Object { return &lvmv1.LVMVolumeGroup{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &lvmv1.LVMVolumeGroupList{})
			s.LVMVolumeGroups = l.Items
			return err
		}},
	{resource: "lvmvolumegroupnodestatuses.lvm.topolvm.io", group: groupLVMv1, required: true,
		newObject: func() client.Object { return &lvmv1.LVMVolumeGroupNodeStatus{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &lvmv1.LVMVolumeGroupNodeStatusList{})
			s.NodeStatuses = l.Items
			return err
		}},
	{resource: "logicalvolumes.topolvm.io", group: groupTopoLVM, newObject: func() client.Object { return &topolvmv1.LogicalVolume{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &topolvmv1.LogicalVolumeList{})
			s.LogicalVolumes = l.Items
			return err
		}},
	{resource: "logicalvolumegroupsnapshots.topolvm.io", group: groupTopoLVM, optional: true,
		newObject: func() client.Object { return &topolvmv1.LogicalVolumeGroupSnapshot{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &topolvmv1.LogicalVolumeGroupSnapshotList{})
			s.GroupSnapshots = l.Items
			return err
		}},
	{resource: "persistentvolumes", group: groupCore, newObject: func() client.Object { return &corev1.PersistentVolume{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &corev1.PersistentVolumeList{})
			s.PVs = l.Items
			return err
		}},
	{resource: "persistentvolumeclaims", group: groupCore, newObject: func() client.Object { return &corev1.PersistentVolumeClaim{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &corev1.PersistentVolumeClaimList{})
			s.PVCs = l.Items
			return err
		}},
	{resource: "pods", group: groupCore, newObject: func() client.Object { return &corev1.Pod{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &corev1.PodList{})
			s.Pods = l.Items
			return err
		}},
	{resource: "storageclasses.storage.k8s.io", group: groupStorage, newObject: func() client.Object { return &storagev1.StorageClass{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &storagev1.StorageClassList{})
			s.StorageClasses = l.Items
			return err
		}},
	{resource: "csistoragecapacities.storage.k8s.io", group: groupStorage, newObject: func() client.Object { return &storagev1.CSIStorageCapacity{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &storagev1.CSIStorageCapacityList{})
			s.StorageCapacities = l.Items
			return err
		}},
	{resource: "volumesnapshotclasses.snapshot.storage.k8s.io", group: groupSnapshot, newObject: newSnapshotClass,
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(snapshotClassGVK.GroupVersion().WithKind("VolumeSnapshotClassList"))
			if err := r.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
				return err
			}
			for i := range l.Items {
				if sc, ok := console.SnapshotClassFrom(&l.Items[i]); ok {
					s.SnapshotClasses = append(s.SnapshotClasses, sc)
				}
			}
			return nil
		}},
	{resource: "nodes", group: groupCore, newObject: func() client.Object { return &corev1.Node{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &corev1.NodeList{})
			s.Nodes = l.Items
			return err
		}},
	{resource: "events", group: groupCore, newObject: func() client.Object { return &corev1.Event{} },
		read: func(ctx context.Context, r client.Reader, s *console.Snapshot) error {
			l, err := listInto(ctx, r, &corev1.EventList{})
			s.Events = l.Items
			return err
		}},
}
