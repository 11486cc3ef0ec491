"""The janitor's repairs (`backlog maintain`, SPEC §6), the kernel side: everything that moves,
commits or deletes a task file, or changes the remote's record, on the janitor's behalf.

The verb (`commands/maintain`) runs the buckets in order and assembles the report; each repair
here takes the task's lock, re-checks on fresh state and then moves through the one move
protocol (`Backend.apply`, `lifecycle.finish_move`, `lifecycle.fail_if_timed_out`), or, for the
copies no protocol step owns (a duplicate, an uncommitted deletion, a leftover), commits and
removes under the same lock.
"""
