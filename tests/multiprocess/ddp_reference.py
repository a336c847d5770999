"""The single-process run the DDP recipe is compared with (tests/test_multiprocess.py).

    python ddp_reference.py RECIPE WORLD_SIZE OUT

Imports docs/scaling.md's DDP recipe from RECIPE (its ``__main__`` part does
not run), trains a fresh model in this one process on the whole batch, as
the WORLD_SIZE ranks' shards accumulated by the recipe's own `train`, and
saves the state dict to OUT.  Run it with the ranks' OMP_NUM_THREADS, so
that PyTorch's kernels run on as many threads as in each rank.
"""

import importlib.util
import sys

import torch

recipe_path, world_size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spec = importlib.util.spec_from_file_location("ddp_recipe", recipe_path)
recipe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recipe)

torch.manual_seed(0)  # the recipe's initial weights
model = recipe.RoIHead()
recipe.train(model, [recipe.shard(rank, world_size) for rank in range(world_size)])
torch.save(model.state_dict(), out)
