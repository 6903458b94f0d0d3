package cli

import (
	"context"
	"fmt"

	"github.com/nats-sinks/nats-sink/internal/jsapi"
	"github.com/nats-sinks/nats-sink/internal/ops"
)

// replayPhase is bench's `--replay` phase: `nats-sink replay --from-seq 1`
// over bench's stream into a fresh destination of sinkType (null: nothing
// written), through the same runner settings as the pipeline phase. It is
// timed from the runner's start until every message of the range settled,
// as the pipeline phase is timed until its ack floor reached the last
// message.
func (o *benchOptions) replayPhase(ctx context.Context, env *Env, t *benchTarget, sinkType string, i int) (benchRow, error) {
	cfg, po, err := o.phaseConfig(env, t, sinkType, fmt.Sprintf("bench-run-%d-%s", i, sinkType))
	if err != nil {
		return benchRow{}, err
	}
	api := jsapi.New(t.nc, jsapi.Prefix(cfg.NATS.Domain, cfg.NATS.APIPrefix))
	defer api.Close()
	plan, err := ops.PlanReplay(ctx, cfg, api, t.js, &ops.ReplayRequest{FromSeq: 1}, po.Logger)
	if err != nil {
		return benchRow{}, fmt.Errorf("replay (%s): %w", sinkType, err)
	}
	defer ops.DeleteConsumer(context.WithoutCancel(ctx), api, t.js, plan.Stream, plan.Name)
	res, err := runReplayPlan(ctx, cfg, &opsConn{nc: t.nc, js: t.js, api: api}, plan, po, nil, nil)
	switch {
	case err != nil:
		return benchRow{}, fmt.Errorf("replay (%s): %w", sinkType, err)
	case res.failure != nil:
		return benchRow{}, fmt.Errorf("replay (%s): %w", sinkType, res.failure)
	case !res.done || res.counts.Messages() != o.messages:
		return benchRow{}, fmt.Errorf("replay (%s): %d of %d messages settled", sinkType, res.counts.Messages(), o.messages)
	}
	return benchRow{fmt.Sprintf("replay (%s)", sinkType), o.messages, res.elapsed.Seconds()}, nil
}
