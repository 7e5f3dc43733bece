[inputs: ["mix.exs", "{lib,test_ex}/**/*.{ex,exs}"]]
