package hopper

import (
	"context"
	"log/slog"
)

// Logger returns the client's logger (Config.Logger) with the job's
// attributes attached — category "worker" ("activity" for a workflow's
// activity; seed 004's categories), job id, type, queue and attempt, and
// the workflow run's id for a run's execution or an activity — so a
// handler's lines say which job wrote them. Logging through it costs
// nothing the logger's level filters out. (The engine's own lines carry
// category "system", its autoscaler's "world".)
func (j *JobContext) Logger() *slog.Logger {
	category := "worker"
	run, activity := j.row.Metadata[wakeKey]
	if activity {
		category = "activity"
	}
	attrs := []any{slog.String("category", category), slog.String("job_id", j.row.ID), slog.String("type", j.row.Type),
		slog.String("queue", j.row.Queue), slog.Int("attempt", j.row.Attempt)}
	if _, id, ok := RunOf(j.row); ok {
		run = id
	}
	if run != "" {
		attrs = append(attrs, slog.String("run_id", run))
	}
	return j.c.log.With(attrs...)
}

// Logger returns the client's logger with the run's attributes attached:
// category "workflow", run id, workflow and attempt. Lines logged while
// replaying recorded operations are logged again on each replay; log
// after a step, or inside it, to log once per execution.
func (st *wfState) Logger() *slog.Logger {
	return st.c.log.With(slog.String("category", "workflow"), slog.String("run_id", st.Run.ID),
		slog.String("workflow", st.Run.Workflow), slog.Int("attempt", st.Attempt()))
}

// LoggerFromContext returns the logger of the job whose handler runs under
// ctx (JobContext.Logger), or slog.Default() outside a handler.
func LoggerFromContext(ctx context.Context) *slog.Logger {
	if j := JobFromContext(ctx); j != nil {
		return j.Logger()
	}
	return slog.Default()
}
