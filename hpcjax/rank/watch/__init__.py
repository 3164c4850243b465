"""What watches a running rank so that a job ends by itself with the real cause: the hang watch
(`hangwatch`), the exit guard (`exitguard`, and `exithook` for an unmodified program), and the node
side of `hpcjax stacks` (`stacks`)."""
