"""What a rank keeps between runs and attempts so that it does not compile again: JAX's persistent
compilation cache (`compile_cache`) and the compiled executables of a step (`executables`)."""
