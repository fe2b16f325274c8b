"""MS-GRPO and related credit assigners, samplers, losses, and the trainer."""
