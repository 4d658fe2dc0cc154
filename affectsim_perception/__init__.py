"""What the observer sees: frozen pretrained person models (BlazePose); recognizers come with the perception issue."""
