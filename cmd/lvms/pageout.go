package main

import (
	"context"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/memtrim"
)

// pageOutDelay is when the first page-out comes: start-up (caches synced, first reconciles) is over.
const pageOutDelay = 30 * time.Second

func addPageOutFlag(f *pflag.FlagSet, interval *time.Duration) {
	f.DurationVar(interval, "page-out-interval", time.Minute,
		"how often the pages of the lvms binary that start-up or a burst of work touched and idle work does not use, and the heap's free pages, are given back to the kernel, first 30 s after start (0 keeps them)")
}

// addPageOut gives back, 30 s after start and then every interval, the binary's pages that start-up ran
// through (every package's initialisation of the one lvms binary) or a burst of work touched, and idle work
// does not need, and the heap's free pages (a garbage collection a minute). Idle work faults its few pages back from the page cache: a few hundred minor faults a
// minute.
func addPageOut(mgr ctrl.Manager, interval time.Duration) error {
	if interval <= 0 {
		return nil
	}
	return mgr.Add(pageOut(interval))
}

// pageOut runs on every replica, leader or not: each has its own pages.
type pageOut time.Duration

var _ manager.LeaderElectionRunnable = pageOut(0)

func (pageOut) NeedLeaderElection() bool { return false }

func (p pageOut) Start(ctx context.Context) error {
	memtrim.Run(ctx, clock.RealClock{}, pageOutDelay, time.Duration(p), func(err error) {
		log.FromContext(ctx).Info("Cannot page out the binary's start-up pages; they stay resident", "reason", err.Error())
	})
	return nil
}
