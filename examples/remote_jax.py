# Seed 003's first examples ("a JAX function on remote accelerators, its value returned"),
# with @hpcjax.remote on a SLURM GPU layout instead of a cloud accelerator name.
#
#   python examples/remote_jax.py       # SLURM where sbatch exists, else this machine's CPU
import hpcjax


@hpcjax.remote(nodes=1, gpus_per_node=2, time="00:10:00")
def jax_computation():
    import jax
    import jax.numpy as jnp

    print(f"Devices: {jax.devices()}")

    x = jnp.ones((1000, 1000))
    result = jnp.dot(x, x)
    return float(result[0, 0])


@hpcjax.remote(nodes=1, gpus_per_node=2, time="00:10:00")
def train(lr):
    import jax
    import jax.numpy as jnp

    def loss_fn(params, x, y):
        pred = x @ params["w"] + params["b"]
        return jnp.mean((pred - y) ** 2)

    grad_fn = jax.grad(loss_fn)

    key = jax.random.PRNGKey(0)
    params = {"w": jax.random.normal(key, (10, 1)), "b": jnp.zeros(1)}
    x = jax.random.normal(key, (512, 10))
    y = x @ jnp.ones((10, 1)) + 0.1 * jax.random.normal(key, (512, 1))

    for step in range(200):
        grads = grad_fn(params, x, y)
        params = {k: params[k] - lr * grads[k] for k in params}
        if step % 50 == 0:
            print(f"step {step}: loss={loss_fn(params, x, y):.4f}")

    return float(loss_fn(params, x, y))


if __name__ == "__main__":
    print(jax_computation())  # 1000.0
    # A sweep: one job per learning rate (a SLURM job array), results in order.
    calls = train.map([0.01, 0.03, 0.1], max_parallel=2)
    for lr, call in zip([0.01, 0.03, 0.1], calls):
        print(f"lr={lr}: final loss {call.result():.4f} (job {call.job_id})")
