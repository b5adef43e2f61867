"""Tasks, the versioned prompt formatter and the ROI presentation."""
from mmbu.benchmark_eval.tasks.images import (ROI_COLOUR, ROI_COLOUR_NAME, Frames, ImageTooLarge, ImageUnreadable,
                                              PreparedImage, image_size_of, plan_frames, prepare_image)
from mmbu.benchmark_eval.tasks.prompts import PROMPT_VERSION, SYSTEM_PROMPT, Prompt, PromptError, build_prompt
from mmbu.benchmark_eval.tasks.spec import FORMS, TASK_SPECS, TEMPLATES, TaskSpec, parse_choice

__all__ = ["FORMS", "PROMPT_VERSION", "ROI_COLOUR", "ROI_COLOUR_NAME", "SYSTEM_PROMPT", "TASK_SPECS", "TEMPLATES",
           "Frames", "ImageTooLarge", "ImageUnreadable", "PreparedImage", "Prompt", "PromptError", "TaskSpec",
           "build_prompt", "image_size_of", "parse_choice", "plan_frames", "prepare_image"]
